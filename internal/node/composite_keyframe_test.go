package node

import (
	"context"
	"net"
	"os/exec"
	"strconv"
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
