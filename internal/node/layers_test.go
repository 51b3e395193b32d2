package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"

	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// vp8Clip encodes ffmpeg's test card (320×240, 15 fps, 40 s) as VP8 with
// one keyframe, at its start, and returns its frames (an IVF file's).
func vp8Clip(t *testing.T) [][]byte {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	path := filepath.Join(t.TempDir(), "clip.ivf")
	out, err := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi",
		"-i", "testsrc=size=320x240:rate=15:duration=40", "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8",
		"-b:v", "300k", "-g", "100000", "-keyint_min", "100000", "-auto-alt-ref", "0", "-f", "ivf", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 32 {
		t.Fatalf("the clip: %v", err)
	}
	// IVF: a 32-byte file header, then per frame its size (4 bytes, LE),
	// its time (8) and its bytes.
	var frames [][]byte
	keys := 0
	for b = b[binary.LittleEndian.Uint16(b[6:]):]; len(b) >= 12; {
		n := int(binary.LittleEndian.Uint32(b))
		if len(b) < 12+n {
			break
		}
		f := b[12 : 12+n]
		if len(f) > 0 && f[0]&1 == 0 { // RFC 6386 §9.1: P=0 is a keyframe
			keys++
		}
		frames = append(frames, f)
		b = b[12+n:]
	}
	if len(frames) < 100 || keys != 1 {
		t.Fatalf("the clip has %d frames, %d keyframes; want 600 and 1", len(frames), keys)
	}
	return frames
}

// publishClip sends the clip in real time on the given simulcast layers
// of pub (indices into its l, m, h tracks) the way a browser does: a
// keyframe at the start and when the node asks with a PLI (the clip
// starts again), never else. It returns how many PLIs came.
func publishClip(ctx context.Context, pub *rtctest.Client, clip [][]byte, layers ...int) *atomic.Int64 {
	var plis atomic.Int64
	again := make(chan struct{}, 1)
	// A simulcast sender's RTCP comes per layer (ReadSimulcastRTCP).
	for _, snd := range pub.Pub.GetSenders() {
		for _, rid := range []string{"l", "m", "h"} {
			go func() {
				for {
					pks, _, err := snd.ReadSimulcastRTCP(rid)
					if err != nil {
						return
					}
					for _, p := range pks {
						if _, ok := p.(*rtcp.PictureLossIndication); ok {
							plis.Add(1)
							select {
							case again <- struct{}{}:
							default:
							}
						}
					}
				}
			}()
		}
	}
	mid, midExt, ridExt := pub.SimulcastExtensions()
	_, video := pub.LocalTracks()
	pz := make([]rtp.Packetizer, len(layers))
	for i := range layers {
		pz[i] = rtp.NewPacketizer(1200, 96, 0, &codecs.VP8Payloader{}, rtp.NewRandomSequencer(), 90000)
	}
	go func() {
		tick := time.NewTicker(time.Second / 15)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-again:
				i = 0
			case <-tick.C:
			}
			f := clip[i%len(clip)]
			for j, l := range layers {
				for _, p := range pz[j].Packetize(f, 90000/15) {
					_ = p.Header.SetExtension(midExt, []byte(mid))
					_ = p.Header.SetExtension(ridExt, []byte(video[l].RID()))
					_ = video[l].WriteRTP(p)
				}
			}
		}
	}()
	return &plis
}

// lowLayers is a node and session with a member, Ada, whose browser
// (pion) sends only the two lower of its three simulcast layers, as
// Chromium does from a 640×360 camera, of the clip: a keyframe only at
// the start and when asked.
type lowLayers struct {
	n        *Node
	session  string
	ada, tok string
	plis     *atomic.Int64
	ridExt   uint8 // the RID header extension's ID in Ada's packets
}

func startLowLayers(t *testing.T, ctx context.Context, beforePublish func(n *Node, session string)) *lowLayers {
	t.Helper()
	clip := vp8Clip(t)
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "simulcast-low")
	ada, tok := joinAs(t, n, s.ID, "Ada", "participant")
	if beforePublish != nil {
		beforePublish(n, s.ID)
	}
	pub, err := rtctest.Dial(ctx, n.URL(), s.ID, tok, rtctest.Options{Video: true, Simulcast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	if err := pub.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	ll := &lowLayers{n: n, session: s.ID, ada: ada, tok: tok, plis: publishClip(ctx, pub, clip, 0, 1)} // l and m, no h
	_, _, ll.ridExt = pub.SimulcastExtensions()
	return ll
}

// TestSimulcastLowLayersLink: such a camera reaches a plain RTP link as
// its middle layer, the highest it sends, and once the link has that
// layer it gets none of the low one; one SSRC throughout (the node
// rewrites the packets after a change of layers). Before, the link heard only the top
// (primary) layer: nothing.
func TestSimulcastLowLayersLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rx := udpConn(t)
	ll := startLowLayers(t, ctx, func(n *Node, session string) {
		addLink(t, n, session, map[string]any{"remote": rx.LocalAddr().String(), "kind": "video", "direction": "recvonly"})
	})
	// Each packet's layer by the RID in it (the node forwards the
	// browser's header extensions to a plain link as they are).
	ssrcs := map[uint32]bool{}
	count := func(packets int) map[string]int {
		t.Helper()
		got := map[string]int{}
		buf := make([]byte, 1500)
		for got["m"] < packets {
			_ = rx.SetReadDeadline(time.Now().Add(15 * time.Second))
			k, err := rx.Read(buf)
			if err != nil {
				t.Fatalf("the plain RTP link: %v after %v", err, got)
			}
			var p rtp.Packet
			if p.Unmarshal(buf[:k]) == nil && p.PayloadType == 96 {
				got[string(p.GetExtension(ll.ridExt))]++
				ssrcs[p.SSRC] = true
			}
		}
		return got
	}
	t.Logf("the plain RTP link's first packets by layer: %v", count(100))
	if then := count(100); then["l"] != 0 || then["h"] != 0 {
		t.Errorf("after the middle layer the link got %v, want the middle layer's only", then)
	}
	if len(ssrcs) != 1 {
		t.Errorf("the link got %d SSRCs, want one stream across the change of layers", len(ssrcs))
	}
}

// TestSimulcastLowLayersThumbnail: the thumbnail of such a camera, asked
// for by its member's ID, is made, though the camera sends a keyframe
// only when asked: the grabber's child loses the first one it asks for
// (it reaches the child's port before ffmpeg binds it), and before, it
// never asked again ("Output file #0 does not contain any stream", again
// and again).
func TestSimulcastLowLayersThumbnail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ll := startLowLayers(t, ctx, nil)
	// A request waits 8 s; the test asks again for up to 20 s from the
	// first that found the camera (404 before its tracks came; the
	// clip's keyframe comes again only after 40 s unless asked for).
	before := ll.plis.Load()
	url := ll.n.URL() + "/api/v1/sessions/" + ll.session + "/tracks/" + ll.ada + "/thumbnail.jpg"
	var img []byte
	deadline := time.Now().Add(30 * time.Second)
	found := false
	for img == nil && time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+ll.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 404 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !found {
			found, deadline = true, time.Now().Add(20*time.Second)
		}
		t.Logf("thumbnail: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		if resp.StatusCode == 200 {
			img = b
		}
	}
	if img == nil {
		t.Fatalf("no thumbnail (%d PLIs since it was asked for)", ll.plis.Load()-before)
	}
	jc, err := jpeg.DecodeConfig(bytes.NewReader(img))
	if err != nil || jc.Width != 320 || jc.Height != 240 {
		t.Errorf("thumbnail: %dx%d, %v; want a 320x240 JPEG", jc.Width, jc.Height, err)
	}
	t.Logf("%d PLIs since the thumbnail was asked for", ll.plis.Load()-before)
}
