package playback

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/pion/rtp"

	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/rtpdump"
)

// Speeds a Player takes.
const (
	MinSpeed = 0.5
	MaxSpeed = 2.0
)

// Errors.
var (
	ErrSpeed = fmt.Errorf("playback: speed must be %.1f to %.1f", MinSpeed, MaxSpeed)
	ErrSeek  = errors.New("playback: position outside the recording")
)

// Track is one stream a Player sends.
type Track struct {
	Stream *export.Stream
	Kind   media.Kind
	SSRC   uint32 // what its packets carry
	Sent   uint64 // packets sent

	f     *os.File
	r     *rtpdump.Reader
	base  time.Duration // the file's offsets count from here on the time line, Shift included
	next  []byte        // the next packet, a copy
	at    time.Duration // its place on the time line
	has   bool
	video bool
	rw    rewriter
	str   *stretch // audio the node can encode: played at other speeds (stretch.go)
}

// Emit is told each packet a Player sends: b is the Player's, valid until
// Emit returns; the caller copies what it keeps.
type Emit func(t *Track, b []byte)

// Player replays a recording's RTP streams. It is not safe for concurrent
// use: Playback owns one in a goroutine.
type Player struct {
	rec    *export.Recording
	Tracks []*Track
	// Texts are the recording's chat lines; OnText, if set, gets each
	// when its place on the time line comes (text.go).
	Texts    []Text
	OnText   func(Text)
	nextText int
	speed    float64
	playing  bool
	ended    bool
	pos0     time.Duration // position at at0
	at0      time.Time
	duration time.Duration
}

// NewPlayer opens every stream of rec (each file once), stopped at
// position 0 at speed 1.
func NewPlayer(rec *export.Recording) (*Player, error) {
	p := &Player{rec: rec, speed: 1, duration: rec.Duration, Texts: textsOf(rec.Manifest)}
	for _, s := range append(append([]*export.Stream(nil), rec.Audio...), rec.Video...) {
		k := media.Audio
		if strings.HasPrefix(strings.ToLower(s.Codec), "video/") {
			k = media.Video
		}
		t := &Track{Stream: s, Kind: k, SSRC: rand.Uint32() | 1, video: k == media.Video}
		t.rw = rewriter{ssrc: t.SSRC, rate: s.Rate, speed: 1}
		if k == media.Audio {
			t.str = newStretch(s)
		}
		if err := t.open(rec.Manifest.Started); err != nil {
			p.Close()
			return nil, err
		}
		p.Tracks = append(p.Tracks, t)
	}
	return p, nil
}

// Close closes the stream files.
func (p *Player) Close() {
	for _, t := range p.Tracks {
		if t.f != nil {
			t.f.Close()
		}
	}
}

// open (re)opens the track's file at its first packet.
func (t *Track) open(started time.Time) error {
	if t.f != nil {
		t.f.Close()
	}
	f, err := os.Open(t.Stream.Path)
	if err != nil {
		return fmt.Errorf("playback: %w", err)
	}
	r, err := rtpdump.NewReader(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("playback: %s: %w", t.Stream.Path, err)
	}
	t.f, t.r = f, r
	t.base = r.Header().Start.Sub(started) + t.Stream.Shift
	return t.advance()
}

// advance reads the track's next RTP packet of its payload type; at the
// end (a torn last record included) has is false.
func (t *Track) advance() error {
	t.has = false
	for {
		rec, err := t.r.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("playback: %s: %w", t.Stream.Path, err)
		}
		b := rec.Data
		if rec.RTCP || len(b) < 12 || b[0]>>6 != 2 {
			continue
		}
		t.next = append(t.next[:0], b...)
		t.at = t.base + time.Duration(rec.Offset)*time.Millisecond
		t.has = true
		return nil
	}
}

// keyframe reports whether the track's next packet starts a keyframe.
func (t *Track) keyframe() bool {
	var h rtp.Header
	n, err := h.Unmarshal(t.next)
	return err == nil && n <= len(t.next) && media.Keyframe(t.Stream.Codec, t.next[n:])
}

// Duration is the recording's length.
func (p *Player) Duration() time.Duration { return p.duration }

// Speed is the current speed.
func (p *Player) Speed() float64 { return p.speed }

// Playing reports whether the player is playing (not paused, not ended).
func (p *Player) Playing() bool { return p.playing }

// Ended reports whether every packet was sent.
func (p *Player) Ended() bool { return p.ended }

// Position is where on the recording's time line the player is at now.
func (p *Player) Position(now time.Time) time.Duration {
	if !p.playing {
		return p.pos0
	}
	return min(p.duration, p.pos0+time.Duration(math.Round(float64(now.Sub(p.at0))*p.speed)))
}

// Play starts or resumes playing at now.
func (p *Player) Play(now time.Time) {
	if p.playing || p.ended {
		return
	}
	p.playing, p.at0 = true, now
	p.cut(false)
}

// Pause stops the clock at now's position.
func (p *Player) Pause(now time.Time) {
	if !p.playing {
		return
	}
	p.pos0 = p.Position(now)
	p.playing = false
}

// SetSpeed changes the speed from now on.
func (p *Player) SetSpeed(now time.Time, s float64) error {
	if !(s >= MinSpeed && s <= MaxSpeed) {
		return ErrSpeed
	}
	p.pos0, p.at0 = p.Position(now), now
	p.speed = s
	p.cut(true)
	return nil
}

// cut makes each track's next packet start a new run of timestamps;
// reset also drops the stretched audio not sent yet (a seek, a new speed).
func (p *Player) cut(reset bool) {
	for _, t := range p.Tracks {
		t.rw.cut(p.speed)
		if t.str == nil {
			continue
		}
		if reset {
			t.str.reset(p.speed)
		} else {
			t.str.due = time.Time{}
		}
	}
}

// Seek moves to position to: audio from its first packet at or after it,
// video from the last keyframe at or before it (else from its first packet
// after it), sent at once up to to. Playing or paused stays so.
func (p *Player) Seek(now time.Time, to time.Duration) error {
	if to < 0 || to > p.duration {
		return ErrSeek
	}
	started := p.rec.Manifest.Started
	for _, t := range p.Tracks {
		// The video's start: the index of the last keyframe packet at or
		// before to.
		from := -1
		if t.video {
			if err := t.open(started); err != nil {
				return err
			}
			for i := 0; t.has && t.at <= to; i++ {
				if t.keyframe() {
					from = i
				}
				if err := t.advance(); err != nil {
					return err
				}
			}
		}
		if err := t.open(started); err != nil {
			return err
		}
		for i := 0; t.has && ((from >= 0 && i < from) || (from < 0 && t.at < to)); i++ {
			if err := t.advance(); err != nil {
				return err
			}
		}
	}
	p.nextText = sort.Search(len(p.Texts), func(i int) bool { return p.Texts[i].At >= to })
	p.pos0, p.at0 = to, now
	p.ended = false
	p.cut(true)
	return nil
}

// Step sends every packet due by now through emit and returns how long
// (wall time) until the next is due; done when the last was sent (the
// player then counts as ended and not playing). A paused player sends
// nothing and returns a wait of -1.
//
// At a speed other than 1 an audio stream the node can encode is
// stretched (stretch.go): its recorded packets go into the stretcher when
// their place on the time line comes, and its frames go out every 20 ms.
func (p *Player) Step(now time.Time, emit Emit) (wait time.Duration, done bool) {
	if !p.playing {
		return -1, p.ended
	}
	pos := p.Position(now)
	stretching := p.speed != 1
	var t *Track
	for {
		t = nil
		for _, c := range p.Tracks {
			if c.has && (t == nil || c.at < t.at) {
				t = c
			}
		}
		if t == nil || t.at > pos {
			break
		}
		if stretching && t.str != nil {
			t.str.push(t.next)
			t.str.send(t, now, emit)
		} else {
			t.rw.rewrite(t.next, now)
			t.Sent++
			emit(t, t.next)
		}
		if err := t.advance(); err != nil {
			t.has = false // a bad record ends its stream; the others go on
		}
	}
	for p.nextText < len(p.Texts) && p.Texts[p.nextText].At <= pos {
		if p.OnText != nil {
			p.OnText(p.Texts[p.nextText])
		}
		p.nextText++
	}
	wait = -1
	if t != nil {
		// Rounded up, so the position then has reached the packet.
		wait = max(time.Nanosecond, time.Duration(math.Ceil(float64(t.at-pos)/p.speed)))
	}
	if p.nextText < len(p.Texts) {
		w := max(time.Nanosecond, time.Duration(math.Ceil(float64(p.Texts[p.nextText].At-pos)/p.speed)))
		if wait < 0 || w < wait {
			wait = w
		}
	}
	if stretching {
		for _, c := range p.Tracks {
			if c.str == nil {
				continue
			}
			c.str.send(c, now, emit)
			if w, ok := c.str.wait(now); ok && (wait < 0 || w < wait) {
				wait = max(w, time.Nanosecond)
			}
		}
	}
	if wait < 0 {
		p.pos0, p.playing, p.ended = p.duration, false, true
		return -1, true
	}
	return wait, false
}
