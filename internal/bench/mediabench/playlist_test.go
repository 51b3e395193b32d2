package mediabench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// ffmpegPlaylist is what ffmpeg 5.1's HLS muxer writes with the node's
// flags (program_date_time, independent_segments), after a restart.
const ffmpegPlaylist = `#EXTM3U
#EXT-X-VERSION:6
#EXT-X-TARGETDURATION:2
#EXT-X-MEDIA-SEQUENCE:41
#EXT-X-INDEPENDENT-SEGMENTS
#EXT-X-PROGRAM-DATE-TIME:2026-11-25T15:45:01.123+0000
#EXTINF:2.000000,
seg41.ts
#EXT-X-DISCONTINUITY
#EXTINF:1.966667,
seg42.ts
#EXTINF:2.000000,
seg43.ts
`

func TestParsePlaylist(t *testing.T) {
	p, err := ParsePlaylist([]byte(ffmpegPlaylist))
	if err != nil {
		t.Fatal(err)
	}
	if p.Sequence != 41 || p.Target != 2*time.Second || p.Ended || len(p.Segments) != 3 {
		t.Fatalf("got %+v", p)
	}
	want := []Segment{{41, "seg41.ts", 2 * time.Second}, {42, "seg42.ts", 1966667 * time.Microsecond}, {43, "seg43.ts", 2 * time.Second}}
	for i, s := range p.Segments {
		if s != want[i] {
			t.Errorf("segment %d: %+v, want %+v", i, s, want[i])
		}
	}
	ended, err := ParsePlaylist([]byte("#EXTM3U\r\n#EXTINF:4,\r\nhttp://x/a.ts\r\n#EXT-X-ENDLIST\r\n"))
	if err != nil || !ended.Ended || len(ended.Segments) != 1 || ended.Segments[0].URI != "http://x/a.ts" {
		t.Errorf("CRLF, absolute URI, ENDLIST: %+v %v", ended, err)
	}
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"empty":             {"", ErrNotPlaylist},
		"html":              {"<html>502 Bad Gateway</html>", ErrNotPlaylist},
		"master":            {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n", ErrMaster},
		"negative sequence": {"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n", ErrBadTag},
		"huge sequence":     {"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807\n", ErrBadTag},
		"bad target":        {"#EXTM3U\n#EXT-X-TARGETDURATION:two\n", ErrBadTag},
		"NaN duration":      {"#EXTM3U\n#EXTINF:NaN,\na.ts\n", ErrBadTag},
		"negative duration": {"#EXTM3U\n#EXTINF:-2,\na.ts\n", ErrBadTag},
		"URI without INF":   {"#EXTM3U\na.ts\n", ErrBadTag},
	} {
		if _, err := ParsePlaylist([]byte(c.in)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func seg(n int) Segment {
	return Segment{Seq: n, URI: "seg" + string(rune('0'+n%10)) + ".ts", Duration: 2 * time.Second}
}

func list(first, last int) Playlist {
	p := Playlist{Sequence: first, Target: 2 * time.Second}
	for n := first; n <= last; n++ {
		p.Segments = append(p.Segments, seg(n))
	}
	return p
}

func seqs(ss []Segment) []int {
	var out []int
	for _, s := range ss {
		out = append(out, s.Seq)
	}
	return out
}

// TestFollower: a viewer starts at the newest segment, then fetches each
// new one once, and counts the segments that left the playlist before it
// got to them.
func TestFollower(t *testing.T) {
	var f Follower
	steps := []struct {
		p       Playlist
		fetch   []int
		changed bool
		skipped int
	}{
		{list(0, 0), []int{0}, true, 0},
		{list(0, 0), nil, false, 0}, // nothing new
		{list(0, 2), []int{1, 2}, true, 0},
		{list(1, 2), nil, false, 0},              // the oldest left, nothing new
		{list(5, 8), []int{5, 6, 7, 8}, true, 2}, // 3 and 4 came and went unseen
	}
	for i, s := range steps {
		got, changed := f.Update(s.p)
		if g := seqs(got); len(g) != len(s.fetch) || changed != s.changed || f.Skipped != s.skipped {
			t.Fatalf("step %d: fetch %v changed %v skipped %d, want %v %v %d", i, g, changed, f.Skipped, s.fetch, s.changed, s.skipped)
		}
		for k := range s.fetch {
			if got[k].Seq != s.fetch[k] {
				t.Fatalf("step %d: fetch %v, want %v", i, seqs(got), s.fetch)
			}
		}
	}
	if got, changed := (&Follower{}).Update(Playlist{}); got != nil || changed {
		t.Errorf("an empty playlist: %v %v", got, changed)
	}
}

func TestReload(t *testing.T) {
	p := list(0, 1)
	p.Segments[1].Duration = 1500 * time.Millisecond
	for _, c := range []struct {
		p       Playlist
		changed bool
		want    time.Duration
	}{
		{p, true, 1500 * time.Millisecond}, // the last segment's duration
		{p, false, time.Second},            // half the target
		{Playlist{}, true, time.Second},
		{Playlist{}, false, time.Second},
	} {
		if got := Reload(c.p, c.changed); got != c.want {
			t.Errorf("Reload(%d segments, changed %v) = %v, want %v", len(c.p.Segments), c.changed, got, c.want)
		}
	}
}

// FuzzParsePlaylist: a server's answer never panics the parser, the
// segments it returns are numbered on from the media sequence, bounded,
// and have durations of an hour at most.
func FuzzParsePlaylist(f *testing.F) {
	f.Add([]byte(ffmpegPlaylist))
	f.Add([]byte("#EXTM3U\n#EXT-X-ENDLIST\n"))
	f.Add([]byte("#EXTM3U\n#EXTINF:1e308,\na\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlaylist(b)
		if err != nil {
			return
		}
		if len(p.Segments) > maxSegments {
			t.Fatalf("%d segments", len(p.Segments))
		}
		for i, s := range p.Segments {
			if s.Seq != p.Sequence+i || s.Duration < 0 || s.Duration > time.Hour || s.URI == "" {
				t.Fatalf("segment %d: %+v (sequence %d)", i, s, p.Sequence)
			}
		}
		var fl Follower
		got, _ := fl.Update(p)
		if len(p.Segments) > 0 && len(got) != 1 {
			t.Fatalf("the first update fetches %d segments", len(got))
		}
		if d := Reload(p, true); d <= 0 {
			t.Fatalf("reload after %v", d)
		}
	})
}

// gohlslibMaster is the multivariant playlist of a Convene LL-HLS stream.
const gohlslibMaster = `#EXTM3U
#EXT-X-VERSION:9
#EXT-X-INDEPENDENT-SEGMENTS

#EXT-X-MEDIA:TYPE="AUDIO",GROUP-ID="audio",NAME="mix",AUTOSELECT=YES,DEFAULT=YES,URI="audio2_stream.m3u8"

#EXT-X-STREAM-INF:BANDWIDTH=1165904,AVERAGE-BANDWIDTH=1016472,CODECS="avc1.640016,opus",RESOLUTION=320x240,FRAME-RATE=15.000,AUDIO="audio"
video1_stream.m3u8
`

func TestFirstVariant(t *testing.T) {
	for in, want := range map[string]string{
		gohlslibMaster: "video1_stream.m3u8",
		"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\n# a comment\nlow.m3u8\nhigh.m3u8\n": "low.m3u8",
	} {
		if got, err := FirstVariant([]byte(in)); err != nil || got != want {
			t.Errorf("FirstVariant = %q, %v; want %q", got, err, want)
		}
	}
	for in, want := range map[string]error{
		"":                      ErrNotPlaylist,
		"index.m3u8":            ErrNotPlaylist,
		ffmpegPlaylist:          ErrNoVariant,
		"#EXTM3U\nvideo.m3u8\n": ErrNoVariant,
	} {
		if _, err := FirstVariant([]byte(in)); !errors.Is(err, want) {
			t.Errorf("FirstVariant(%q): %v, want %v", in, err, want)
		}
	}
}

// FuzzFirstVariant: a server's answer never panics it, and a URI it
// finds is a line of the answer, not a tag.
func FuzzFirstVariant(f *testing.F) {
	f.Add([]byte(gohlslibMaster))
	f.Add([]byte(ffmpegPlaylist))
	f.Add([]byte("#EXTM3U\n#EXT-X-STREAM-INF:\n#\n \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := FirstVariant(b)
		if err != nil {
			return
		}
		if u == "" || strings.HasPrefix(u, "#") || !strings.Contains(string(b), u) {
			t.Fatalf("FirstVariant = %q", u)
		}
	})
}
