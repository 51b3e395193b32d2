package node

import (
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// rgb is a colour as ffmpeg's lavfi names it.
type rgb [3]float64

var testColours = []struct {
	name string
	rgb  rgb
}{{"red", rgb{255, 0, 0}}, {"green", rgb{0, 128, 0}}, {"blue", rgb{0, 0, 255}}, {"white", rgb{255, 255, 255}}}

// sendColours makes one ffmpeg send four solid-colour VP8 streams
// (320×240, 15 fps, a keyframe a second), each through a plain RTP link
// of its own member, named after its colour, who joined in that order;
// it returns the links.
func sendColours(t *testing.T, n *Node, sid string) []linkJSON {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	args := []string{"-hide_banner", "-loglevel", "error", "-nostdin"}
	for _, c := range testColours {
		args = append(args, "-re", "-f", "lavfi", "-i", "color=c="+c.name+":s=320x240:r=15:d=120")
	}
	var links []linkJSON
	for i, c := range testColours {
		id, _ := joinAs(t, n, sid, c.name, "participant")
		tee := newTee(t)
		l := addLink(t, n, sid, map[string]any{"remote": tee.remote(), "kind": "video", "direction": "sendonly", "member": id})
		tee.run(l)
		links = append(links, l)
		args = append(args, "-map", string(rune('0'+i))+":v", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "150k",
			"-g", "15", "-f", "rtp", "rtp://"+tee.target())
	}
	startChild(t, exec.Command(bin, args...))
	return links
}

// outTap receives a track as a subscriber would: it notes every packet's
// SSRC, sequence number and timestamp and hands it to a decoder's feed.
type outTap struct {
	feed *ffmpeg.Feed
	mu   sync.Mutex
	pkts [][3]uint32 // ssrc, seq, ts
}

func (o *outTap) Deliver(pk *media.Packet, from *broker.Track) {
	b := pk.Bytes()
	if len(b) >= 12 {
		o.mu.Lock()
		o.pkts = append(o.pkts, [3]uint32{binary.BigEndian.Uint32(b[8:]), uint32(binary.BigEndian.Uint16(b[2:])), binary.BigEndian.Uint32(b[4:])})
		o.mu.Unlock()
	}
	o.feed.Deliver(pk, from)
}

func (o *outTap) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pkts)
}

// decoder decodes a VP8 track of the room into rgb24 frames of w×h, as
// they come (no frames repeated to fill a gap in the timestamps).
type decoder struct {
	frames chan []byte
}

func decodeTrack(t *testing.T, n *Node, sid string, tr *broker.Track, w, h int) (*decoder, *outTap) {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	sdp := filepath.Join(t.TempDir(), "out.sdp")
	st := ffmpeg.VideoStream(tr, ports[0])
	if err := os.WriteFile(sdp, []byte(ffmpeg.SDP(st)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The track must be sending before the decoder starts: ffmpeg gives
	// up on an SDP input that brings nothing for 10 s, and a composite's
	// child on a loaded machine can take longer than that to begin.
	feed, err := ffmpeg.NewFeed(st, ffmpeg.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	tap := &outTap{feed: feed}
	untap := n.sessions.Room(sid).Tap(tr, "test-decoder", tap)
	t.Cleanup(func() {
		untap()
		feed.Close()
	})
	testutil.WaitFor(t, 60*time.Second, "the track's first packets", func() bool { return tap.count() > 0 })
	cmd := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-protocol_whitelist", "file,udp,rtp",
		"-reorder_queue_size", "64", "-i", sdp, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startChild(t, cmd)
	d := &decoder{frames: make(chan []byte, 1024)}
	go func() {
		defer close(d.frames)
		for {
			f := make([]byte, w*h*3)
			if _, err := io.ReadFull(out, f); err != nil {
				return
			}
			d.frames <- f
		}
	}()
	return d, tap
}

// next is the next decoded frame after skipping skip of them (and those
// decoded already).
func (d *decoder) next(t *testing.T, skip int) []byte {
	t.Helper()
	for len(d.frames) > 0 {
		<-d.frames
	}
	for i := 0; ; i++ {
		select {
		case f, ok := <-d.frames:
			if !ok {
				t.Fatal("the decoder ended")
			}
			if i >= skip {
				return f
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no decoded frame of the composite in 20 s")
		}
	}
}

// mean is the mean colour of a w×h rgb24 frame's rectangle.
func mean(f []byte, w, x0, y0, x1, y1 int) rgb {
	var s rgb
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			for c := range 3 {
				s[c] += float64(f[(y*w+x)*3+c])
			}
		}
	}
	k := float64((x1 - x0) * (y1 - y0))
	return rgb{s[0] / k, s[1] / k, s[2] / k}
}

// checkQuadrants: each quadrant's middle (clear of the pillarbox bars of
// a 4:3 camera in a 16:9 cell and of the name at the bottom) is its
// camera's colour, within 60 per channel.
func checkQuadrants(t *testing.T, f []byte, w, h int, colours []string) {
	t.Helper()
	for i, name := range colours {
		c := testColours[0]
		for _, tc := range testColours {
			if tc.name == name {
				c = tc
			}
		}
		if name == "black" {
			c.name, c.rgb = "black", rgb{}
		}
		cx, cy := (i%2)*w/2+w/4, (i/2)*h/2+h/4-h/16
		got := mean(f, w, cx-w/8, cy-h/10, cx+w/8, cy+h/10)
		for k := range 3 {
			if d := got[k] - c.rgb[k]; d > 60 || d < -60 {
				t.Errorf("quadrant %d: mean colour %.0f, want %s %.0f", i, got, c.name, c.rgb)
				break
			}
		}
	}
}

// signalChild sends a composite's ffmpeg child sig and waits for another
// child to run: it returns the signalled child's PID and the wait.
func signalChild(t *testing.T, n *Node, id string, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	pid := n.composites.PID(id)
	if pid == 0 {
		t.Fatal("no ffmpeg child")
	}
	t0 := time.Now()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "another child", func() bool {
		p := n.composites.PID(id)
		return p != 0 && p != pid
	})
	return pid, time.Since(t0).Round(time.Millisecond)
}

type compositeJSON struct {
	ID        string   `json:"id"`
	Track     string   `json:"track"`
	Member    string   `json:"member"`
	Showing   []string `json:"showing"`
	Restarts  uint64   `json:"restarts"`
	Frames    uint64   `json:"frames"`
	LoadCores float64  `json:"load_cores"`
}

// TestCompositeFFmpeg: four members' solid-colour cameras (red, green,
// blue, white, in join order) make a 2×2 composite once the chair asks
// (a participant may not; a second beyond composite.max is 429); a
// decoder tapping its output track finds each colour in its quadrant.
// Killing the ffmpeg child starts a new one (logged: how long it took),
// and the decoder, which sees one stream (one SSRC, sequence numbers on
// by one), decodes the same picture after it; a hung child (SIGSTOP) is
// replaced by the supervisor; a camera that leaves leaves a black cell.
// Stopping the composite takes its track and member away.
func TestCompositeFFmpeg(t *testing.T) {
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.Composite.Max = 1
	n := startNode(t, cfg)
	s := createSession(t, n, "composite")
	links := sendColours(t, n, s.ID)
	url := n.URL() + "/api/v1/sessions/" + s.ID + "/composites"

	_, ptok := joinAs(t, n, s.ID, "Pat", "participant")
	if code := callAs(t, ptok, "POST", url, map[string]any{"layout": "grid2"}, nil); code != 403 {
		t.Errorf("a participant starts a composite: %d, want 403", code)
	}
	_, ctok := joinAs(t, n, s.ID, "Chris", "chair")
	if code := callAs(t, ctok, "POST", url, map[string]any{"layout": "grid5"}, nil); code != 400 {
		t.Errorf("an unknown layout: %d, want 400", code)
	}
	var c compositeJSON
	if code := callAs(t, ctok, "POST", url, map[string]any{"layout": "grid2"}, &c); code != 201 {
		t.Fatalf("the chair starts a composite: %d", code)
	}
	if code := callAs(t, ctok, "POST", url, map[string]any{"layout": "grid3"}, nil); code != 429 {
		t.Errorf("a composite beyond composite.max: %d, want 429", code)
	}
	list := func() compositeJSON {
		var l struct{ Composites []compositeJSON }
		if code := callAs(t, ctok, "GET", url, nil, &l); code != 200 || len(l.Composites) != 1 {
			t.Fatalf("list: %d, %d composites", code, len(l.Composites))
		}
		return l.Composites[0]
	}
	testutil.WaitFor(t, 30*time.Second, "four cameras shown", func() bool {
		g := list()
		shown := 0
		for _, id := range g.Showing {
			if id != "" {
				shown++
			}
		}
		return shown == 4
	})
	var out *broker.Track
	for _, tr := range n.sessions.Room(s.ID).Tracks() {
		if tr.ID() == c.Track {
			out = tr
		}
	}
	if out == nil {
		t.Fatalf("the output track %s is not in the room", c.Track)
	}
	if out.Owner() != c.Member || out.Info().Codec != "video/VP8" {
		t.Errorf("output track owner %q codec %q, want %q video/VP8", out.Owner(), out.Info().Codec, c.Member)
	}
	const w, h = 640, 360
	dec, tap := decodeTrack(t, n, s.ID, out, w, h)
	checkQuadrants(t, dec.next(t, 15), w, h, []string{"red", "green", "blue", "white"})

	// CPU of one 2×2 360p 15 fps composite, from /proc over 4 s.
	if pid := n.composites.PID(c.ID); pid != 0 {
		cpu0, err0 := ffmpeg.CPUTime(pid)
		t0 := time.Now()
		time.Sleep(4 * time.Second)
		cpu1, err1 := ffmpeg.CPUTime(pid)
		if err0 == nil && err1 == nil {
			t.Logf("the child used %.3f cores over %v", (cpu1-cpu0).Seconds()/time.Since(t0).Seconds(), time.Since(t0).Round(time.Millisecond))
		}
	}
	g := list()
	t.Logf("composite %s: %d frames, child CPU %.3f cores (the service's smoothed measure)", g.ID, g.Frames, g.LoadCores)

	before := tap.count()
	pid, took := signalChild(t, n, c.ID, syscall.SIGKILL)
	t.Logf("the killed child (pid %d) was replaced by pid %d after %v", pid, n.composites.PID(c.ID), took)
	testutil.WaitFor(t, 20*time.Second, "output after the restart", func() bool { return tap.count() > before+100 })
	if g := list(); g.Restarts < 1 {
		t.Errorf("restarts %d after a kill", g.Restarts)
	}
	// The decoder goes on: the same picture from the new child.
	checkQuadrants(t, dec.next(t, 10), w, h, []string{"red", "green", "blue", "white"})

	// A child that stops beating (SIGSTOP) is killed by the supervisor
	// and replaced.
	pid, took = signalChild(t, n, c.ID, syscall.SIGSTOP)
	t.Logf("the hung child (pid %d) was replaced after %v", pid, took)
	syscall.Kill(pid, syscall.SIGKILL) // if the supervisor's kill has not reached it yet

	// A camera that leaves leaves a black cell: a new child with three.
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links/"+links[3].ID, nil, nil); code != 204 {
		t.Fatalf("remove the white camera's link: %d", code)
	}
	testutil.WaitFor(t, 15*time.Second, "three cameras shown", func() bool {
		g := list()
		return len(g.Showing) == 4 && g.Showing[3] == "" && g.Showing[2] != ""
	})
	checkQuadrants(t, dec.next(t, 20), w, h, []string{"red", "green", "blue", "black"})

	tap.mu.Lock()
	pk := append([][3]uint32(nil), tap.pkts...)
	tap.mu.Unlock()
	gaps := 0
	for i := 1; i < len(pk); i++ {
		if pk[i][0] != pk[0][0] {
			t.Fatalf("packet %d has SSRC %x, the first %x", i, pk[i][0], pk[0][0])
		}
		if d := uint16(pk[i][1] - pk[i-1][1]); d != 1 {
			gaps++
			if d == 0 || d > 16 {
				t.Errorf("packet %d: sequence number %d after %d", i, pk[i][1], pk[i-1][1])
			}
		}
		if int32(pk[i][2]-pk[i-1][2]) < 0 {
			t.Errorf("packet %d: timestamp %d went back from %d", i, pk[i][2], pk[i-1][2])
		}
	}
	t.Logf("%d packets of one SSRC through the restart, %d sequence gaps", len(pk), gaps)

	if code := callAs(t, ctok, "DELETE", url+"/"+c.ID, nil, nil); code != 204 {
		t.Errorf("stop: %d", code)
	}
	var l struct{ Composites []compositeJSON }
	if code := callAs(t, ctok, "GET", url, nil, &l); code != 200 || len(l.Composites) != 0 {
		t.Errorf("after stop: %d, %d composites", code, len(l.Composites))
	}
	for _, tr := range n.sessions.Room(s.ID).Tracks() {
		if tr.ID() == c.Track {
			t.Errorf("the output track is still in the room")
		}
	}
}

// TestHLSComposite: an HLS stream started with "video":"composite" shows
// a 2×2 composite of the session's cameras (its track is the one the
// stream shows; every stream's picture is 640×360, the composite's own
// size) and stops it when it stops; another video is 400.
func TestHLSComposite(t *testing.T) {
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "hls-composite")
	sendFFmpeg(t, n, s.ID, 60*time.Second)
	hlsURL := n.URL() + "/api/v1/sessions/" + s.ID + "/hls"
	if code := call(t, "POST", hlsURL, map[string]any{"video": "mosaic"}, nil); code != 400 {
		t.Errorf("an unknown video: %d, want 400", code)
	}
	var info struct {
		Video string `json:"video_track"`
	}
	if code := call(t, "POST", hlsURL, map[string]any{"video": "composite"}, &info); code != 201 {
		t.Fatalf("start: %d", code)
	}
	var l struct{ Composites []compositeJSON }
	if code := call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &l); code != 200 || len(l.Composites) != 1 {
		t.Fatalf("composites: %d, %+v", code, l.Composites)
	}
	prefix := signedView(t, n, s.ID, joinToken(t, n, s.ID, "listener"))
	p := waitHLSMedia(t, prefix, "video1_stream.m3u8", 2, 40*time.Second)
	seg := fmp4File(t, prefix, p.init, p.segments[len(p.segments)-1])
	out, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v", "-show_entries", "stream=codec_name,width,height",
		"-of", "csv=p=0", seg).Output()
	if f := strings.Fields(string(out)); err != nil || len(f) == 0 || f[0] != "h264,640,360" {
		t.Errorf("the segment's video: %q %v, want h264,640,360", out, err)
	}
	var h struct {
		Video string `json:"video_track"`
	}
	call(t, "GET", hlsURL, nil, &h)
	if h.Video != l.Composites[0].Track {
		t.Errorf("HLS shows %q, the composite is %q", h.Video, l.Composites[0].Track)
	}
	if code := call(t, "DELETE", hlsURL, nil, nil); code != 204 {
		t.Errorf("stop: %d", code)
	}
	if code := call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &l); code != 200 || len(l.Composites) != 0 {
		t.Errorf("after the stream stopped: %d, %d composites", code, len(l.Composites))
	}
}
