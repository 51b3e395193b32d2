package node

import (
	"context"
	"testing"
	"time"

	"github.com/convene/convene/internal/rtctest"
)

func dialRTC(t *testing.T, n *Node, sid, tok string, opt rtctest.Options) *rtctest.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, n.URL(), sid, tok, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if opt.Audio || opt.Video {
		if err := c.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(context.Background())
		t.Cleanup(mcancel)
		go c.Media(mctx)
	}
	return c
}

// received waits until c has received at least min packets of a track of
// each kind from stream prefix.
func waitMedia(t *testing.T, c *rtctest.Client, member string, kinds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := rtctest.WaitFor(ctx, func() bool {
		for _, k := range kinds {
			ok := false
			for _, r := range c.Received() {
				if r.Kind == k && len(r.Stream) >= len(member) && r.Stream[:len(member)] == member && r.Packets.Load() >= 20 {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		got := map[string]uint64{}
		for id, r := range c.Received() {
			got[id] = r.Packets.Load()
		}
		t.Fatalf("no %v from %s: received %v, tracks %+v, errors %+v", kinds, member, got, c.Tracks(), c.Errors())
	}
}

func TestWebRTCMembersHearAndSeeEachOther(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "webrtc")
	a, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "audio", "video")
	waitMedia(t, cb, a, "audio", "video")
	for _, r := range ca.Received() {
		if r.Stream[:len(a)] == a {
			t.Fatalf("Ada receives her own media: %+v", r)
		}
	}
	// A later joiner gets the existing tracks, and a keyframe soon.
	_, ctok := joinMember(t, n, s.ID, "Cy")
	start := time.Now()
	cc := dialRTC(t, n, s.ID, ctok, rtctest.Options{})
	waitMedia(t, cc, a, "audio", "video")
	waitMedia(t, cc, b, "audio", "video")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool {
		for _, r := range cc.Received() {
			if r.Kind == "video" && r.Keyframes.Load() == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the late joiner saw no keyframe within 5 s")
	}
	t.Logf("late joiner: media and keyframes after %v", time.Since(start))
	// Bob leaves: his tracks go from the others' connections.
	cb.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := rtctest.WaitFor(ctx2, func() bool {
		for _, d := range ca.Tracks() {
			if d.Member == b {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("Bob's tracks still offered to Ada: %+v", ca.Tracks())
	}
}
