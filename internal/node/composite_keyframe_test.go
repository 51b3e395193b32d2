package node

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// TestCompositeAsksKeyframes: a composite asks the browser whose camera
// it shows for a keyframe, as an RTCP PLI on the browser's publisher
// connection, when it starts showing the camera and when its killed
// ffmpeg child is replaced (a new child decodes from a keyframe, and a
// browser sends one only when asked). The camera is a pion publisher that
// sends real VP8 from ffmpeg (a keyframe every 5 s, so the composite's
// output runs) and counts the PLIs it receives.
func TestCompositeAsksKeyframes(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "composite-keyframes")
	plis := publishVP8(t, n, s.ID, "Ada", 75)

	url := n.URL() + "/api/v1/sessions/" + s.ID + "/composites"
	composite := func() compositeJSON {
		var l struct{ Composites []compositeJSON }
		if code := call(t, "GET", url, nil, &l); code != 200 || len(l.Composites) != 1 {
			t.Fatalf("list: %d, %d composites", code, len(l.Composites))
		}
		return l.Composites[0]
	}
	before := plis.Load()
	var c compositeJSON
	if code := call(t, "POST", url, map[string]any{"layout": "grid2", "width": 320, "height": 180, "fps": 5}, &c); code != 201 {
		t.Fatalf("start a composite: %d", code)
	}
	testutil.WaitFor(t, 20*time.Second, "the camera shown", func() bool { sh := composite().Showing; return len(sh) > 0 && sh[0] != "" })
	testutil.WaitFor(t, 20*time.Second, "a PLI once the composite shows the camera", func() bool { return plis.Load() > before })
	t.Logf("%d PLIs before the composite, %d once it showed the camera", before, plis.Load())

	testutil.WaitFor(t, 30*time.Second, "the composite's frames", func() bool { return composite().Frames > 0 })
	before = plis.Load()
	pid, took := signalChild(t, n, c.ID, syscall.SIGKILL)
	t.Logf("the killed child (pid %d) was replaced after %v", pid, took)
	testutil.WaitFor(t, 20*time.Second, "a PLI once the new child runs", func() bool { return plis.Load() > before })
	frames := composite().Frames
	testutil.WaitFor(t, 30*time.Second, "the new child's frames", func() bool { return composite().Frames > frames })
}

// publishVP8 joins a member named name whose pion publisher (a browser's
// publisher connection) sends real VP8 from ffmpeg (320×240, 15 fps, a
// keyframe every gop frames) and counts the PLIs it receives.
func publishVP8(t *testing.T, n *Node, sid, name string, gop int) *atomic.Int64 {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	_, tok := joinAs(t, n, sid, name, "participant")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, err := rtctest.Dial(ctx, n.URL(), sid, tok, rtctest.Options{Video: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	if err := pub.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	plis := new(atomic.Int64)
	for _, snd := range pub.Pub.GetSenders() {
		go func() {
			for {
				pks, _, err := snd.ReadRTCP()
				if err != nil {
					return
				}
				for _, p := range pks {
					if _, ok := p.(*rtcp.PictureLossIndication); ok {
						plis.Add(1)
					}
				}
			}
		}()
	}

	// ffmpeg's VP8 to a socket here, each packet on to the publisher's track.
	in, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	_, video := pub.LocalTracks()
	go func() {
		buf := make([]byte, 1500)
		for {
			k, err := in.Read(buf)
			if err != nil {
				return
			}
			var p rtp.Packet
			if p.Unmarshal(buf[:k]) == nil {
				_ = video[0].WriteRTP(&p)
			}
		}
	}()
	startChild(t, exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-re",
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=120", "-c:v", "libvpx", "-deadline", "realtime",
		"-b:v", "200k", "-g", strconv.Itoa(gop), "-f", "rtp", "rtp://127.0.0.1:"+strconv.Itoa(in.LocalAddr().(*net.UDPAddr).Port)+"?pkt_size=1200"))
	return plis
}

// TestCompositeLeavesOutAKeylessCamera: of a session's two cameras, one
// (a plain RTP link) sends only VP8 interframes, never a keyframe, and
// cannot be asked for one; the composite's child would wait for it, and
// show nothing of the other camera either. After 6 s the composite leaves
// it out (a metric counts it), until it sends a keyframe, and makes
// frames of the good camera.
func TestCompositeLeavesOutAKeylessCamera(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "keyless camera")
	bad, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close() })
	bl := addLink(t, n, s.ID, map[string]any{"remote": bad.LocalAddr().String(), "kind": "video", "direction": "sendonly", "codec": "VP8/90000"})
	to := &net.UDPAddr{IP: net.ParseIP(bl.Local.Addr), Port: bl.Local.RTPPort}
	go func() {
		// Interframes of VP8 (payload descriptor S=1, frame tag bit 0
		// set), 15 a second, one packet each.
		pk := []byte{0x80, 0xe0, 0, 0, 0, 0, 0, 0, 0x0b, 0xad, 0xca, 0xfe, 0x10, 0x01, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8}
		for i := 0; ; i++ {
			pk[2], pk[3] = byte(i>>8), byte(i)
			ts := uint32(i * 6000)
			pk[4], pk[5], pk[6], pk[7] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
			if _, err := bad.WriteToUDP(pk, to); err != nil {
				return
			}
			time.Sleep(66 * time.Millisecond)
		}
	}()
	good := sendFFmpeg(t, n, s.ID, 60*time.Second)
	url := n.URL() + "/api/v1/sessions/" + s.ID + "/composites"
	testutil.WaitFor(t, 10*time.Second, "both cameras in the session", func() bool {
		var sess struct{ Links []linkJSON }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		k := 0
		for _, l := range sess.Links {
			if (l.ID == bl.ID || l.ID == good.ID) && l.Stats.PacketsIn > 0 {
				k++
			}
		}
		return k == 2
	})
	var c compositeJSON
	if code := call(t, "POST", url, map[string]any{"layout": "grid2", "width": 320, "height": 180, "fps": 10}, &c); code != 201 {
		t.Fatalf("start a composite: %d", code)
	}
	started := time.Now()
	composite := func() compositeJSON {
		var l struct{ Composites []compositeJSON }
		call(t, "GET", url, nil, &l)
		if len(l.Composites) != 1 {
			t.Fatalf("%d composites", len(l.Composites))
		}
		return l.Composites[0]
	}
	// Frames of the good camera. A starved machine (CI, -race) may leave
	// the good camera out too for a while, its feed having waited 6 s for
	// the child: it comes back with its next keyframe (one a second), and
	// must then be shown; the keyless camera never comes back.
	shows := func(c compositeJSON, id string) bool {
		return slices.ContainsFunc(c.Showing, func(s string) bool { return strings.HasPrefix(s, id) })
	}
	var got compositeJSON
	testutil.WaitFor(t, 40*time.Second, "the composite's frames of the good camera", func() bool {
		got = composite()
		return got.Frames > 10 && shows(got, good.ID)
	})
	t.Logf("frames %v after the start, showing %v", time.Since(started).Round(time.Millisecond), got.Showing)
	for _, sh := range got.Showing {
		if strings.HasPrefix(sh, bl.ID) {
			t.Errorf("the composite shows the keyless camera %s: %v", bl.ID, got.Showing)
		}
	}
	if v := metricValue(t, n, "convene_composite_keyless_cameras_total"); v < 1 {
		t.Errorf("convene_composite_keyless_cameras_total %v, want at least 1", v)
	}
}
