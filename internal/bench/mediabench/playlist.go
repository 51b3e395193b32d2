package mediabench

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Playlist is what a viewer needs of an HLS media playlist (RFC 8216
// §4.3.3): its media sequence number, its target duration and its
// segments in order.
type Playlist struct {
	Sequence int           // EXT-X-MEDIA-SEQUENCE: the first segment's number
	Target   time.Duration // EXT-X-TARGETDURATION
	Segments []Segment
	Ended    bool // EXT-X-ENDLIST
}

// Segment is one media segment: its number (the playlist's sequence
// number plus its place), its URI as written, and its EXTINF duration.
type Segment struct {
	Seq      int
	URI      string
	Duration time.Duration
}

// Errors of ParsePlaylist.
var (
	ErrNotPlaylist = errors.New("hls: not an extended M3U playlist (no #EXTM3U first)")
	ErrMaster      = errors.New("hls: a master playlist, not a media playlist")
	ErrBadTag      = errors.New("hls: a tag's value does not parse")
)

// maxSegments bounds what a playlist may list: a live playlist holds a
// handful, and the parser reads a server's answer.
const maxSegments = 10000

// maxSequence bounds the media sequence number (RFC 8216 allows up to
// 2^64-1) so that numbering the segments on from it cannot overflow; a
// 2 s segment stream reaches it in 2^63 s.
const maxSequence = 1<<62 - 1

// ParsePlaylist reads a media playlist. It keeps the tags a live viewer
// acts on and skips the others (RFC 8216 §4.1: unknown tags are ignored);
// a URI line belongs to the EXTINF before it. The input is a server's
// answer: every number is checked, and the segments are bounded.
//
//	#EXTM3U
//	#EXT-X-TARGETDURATION:2
//	#EXT-X-MEDIA-SEQUENCE:41
//	#EXTINF:2.000000,
//	seg41.ts
func ParsePlaylist(b []byte) (Playlist, error) {
	var p Playlist
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	first := true
	var dur time.Duration
	haveInf := false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if first {
			if l != "#EXTM3U" {
				return p, ErrNotPlaylist
			}
			first = false
			continue
		}
		switch {
		case l == "":
		case strings.HasPrefix(l, "#EXT-X-STREAM-INF"):
			return p, ErrMaster
		case strings.HasPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"):
			n, err := strconv.Atoi(strings.TrimPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"))
			if err != nil || n < 0 || n > maxSequence {
				return p, ErrBadTag
			}
			p.Sequence = n
		case strings.HasPrefix(l, "#EXT-X-TARGETDURATION:"):
			n, err := strconv.Atoi(strings.TrimPrefix(l, "#EXT-X-TARGETDURATION:"))
			if err != nil || n < 0 || n > 3600 {
				return p, ErrBadTag
			}
			p.Target = time.Duration(n) * time.Second
		case strings.HasPrefix(l, "#EXTINF:"):
			v, _, _ := strings.Cut(strings.TrimPrefix(l, "#EXTINF:"), ",")
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f >= 0 && f <= 3600) { // also refuses NaN
				return p, ErrBadTag
			}
			dur, haveInf = time.Duration(f*float64(time.Second)), true
		case l == "#EXT-X-ENDLIST":
			p.Ended = true
		case strings.HasPrefix(l, "#"):
			// Another tag or a comment.
		default:
			if !haveInf {
				return p, ErrBadTag // a URI without its EXTINF (RFC 8216 §4.3.2.1: required)
			}
			if len(p.Segments) >= maxSegments {
				return p, ErrBadTag
			}
			p.Segments = append(p.Segments, Segment{Seq: p.Sequence + len(p.Segments), URI: l, Duration: dur})
			haveInf = false
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if first {
		return p, ErrNotPlaylist
	}
	return p, nil
}

// Follower is a live viewer's bookkeeping: which segments of the
// playlists it reloads are new to it, when to reload, and what it missed.
// It does no I/O; a viewer's goroutine owns it.
type Follower struct {
	started bool
	next    int // the sequence number of the next segment to fetch
	// Skipped counts segments that left the playlist before the viewer
	// fetched them: a player would have stalled.
	Skipped int
}

// Update takes a reloaded playlist and returns the segments to fetch now,
// in order: on the first playlist, the newest one alone (where a live
// player starts); after it, every segment after the last one returned.
// changed says whether the playlist brought a segment not seen before.
func (f *Follower) Update(p Playlist) (fetch []Segment, changed bool) {
	if len(p.Segments) == 0 {
		return nil, false
	}
	last := p.Segments[len(p.Segments)-1]
	if !f.started {
		f.started, f.next = true, last.Seq+1
		return []Segment{last}, true
	}
	if last.Seq < f.next {
		return nil, false
	}
	if first := p.Segments[0].Seq; first > f.next {
		f.Skipped += first - f.next
		f.next = first
	}
	for _, s := range p.Segments {
		if s.Seq >= f.next {
			fetch = append(fetch, s)
		}
	}
	f.next = last.Seq + 1
	return fetch, true
}

// Reload is how long a viewer waits before reloading the playlist (RFC
// 8216 §6.3.4): the last segment's duration after a load that brought a
// new segment, half the target duration after one that did not. A
// playlist without either is reloaded every second.
func Reload(p Playlist, changed bool) time.Duration {
	t := p.Target
	if changed && len(p.Segments) > 0 {
		t = p.Segments[len(p.Segments)-1].Duration
	} else if !changed {
		t /= 2
	}
	if t <= 0 {
		t = time.Second
	}
	return t
}

// ErrNoVariant is a master playlist that names no variant stream.
var ErrNoVariant = errors.New("hls: a master playlist without a variant stream")

// FirstVariant is the URI of the first variant stream a master
// (multivariant) playlist names: the URI line after its first
// EXT-X-STREAM-INF (RFC 8216 §4.3.4.2). Convene's LL-HLS streams open
// with one: its video's media playlist, beside an audio rendition.
func FirstVariant(b []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	first, inf := true, false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if first {
			if l != "#EXTM3U" {
				return "", ErrNotPlaylist
			}
			first = false
			continue
		}
		switch {
		case l == "":
		case strings.HasPrefix(l, "#EXT-X-STREAM-INF:"):
			inf = true
		case strings.HasPrefix(l, "#"):
		case inf:
			return l, nil
		}
	}
	if first {
		return "", ErrNotPlaylist
	}
	return "", ErrNoVariant
}
