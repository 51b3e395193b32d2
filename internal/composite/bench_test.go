package composite

import (
	"slices"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
)

// sendVP8 publishes one VP8 packet on tr: a keyframe's first packet or an
// interframe's (RFC 7741 descriptor S=1, then the frame tag's P bit).
func sendVP8(tr *broker.Track, key bool) {
	pk := media.NewPacket()
	b := pk.Buffer()[:16]
	clear(b)
	b[0], b[1] = 0x80, 96
	b[12] = 0x10
	if !key {
		b[13] = 0x01
	}
	pk.SetLen(len(b))
	tr.Publish(pk)
}

// TestBenchedCameraBackOnKeyframe: a shown camera whose feed has waited
// 6 s for a keyframe is left out, and stays out (no timed retry that
// would stall the picture again) for as long as it sends only
// interframes; the first keyframe it sends brings it back.
func TestBenchedCameraBackOnKeyframe(t *testing.T) {
	room := broker.New().Open("s")
	good, bad := camera(t, room, "good", "gus", 0, true), camera(t, room, "bad", "bo", 0, true)
	c := chooser(room, Request{Layout: Grid2}, Member{"gus", "Gus"}, Member{"bo", "Bo"})
	c.id = "c1"
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ffmpeg.NewFeed(ffmpeg.VideoStream(bad, ports[0]), ffmpeg.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.slots = []slot{{track: bad, feed: f}}
	untap := room.Tap(bad, "feed", f)
	defer untap()

	now := time.Now()
	step := func(key bool) []string {
		now = now.Add(tick)
		sendVP8(good, true)
		sendVP8(bad, key)
		return shown(c.choose(now))
	}
	if got, want := step(false), []string{"good/Gus", "bad/Bo", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("at first: %q, want %q", got, want)
	}
	for range int(keyless / tick) {
		step(false)
	}
	// 6 s of interframes: out, and out for a minute more of them.
	for i := range int(time.Minute / tick) {
		if got, want := step(false), []string{"good/Gus", "", "", ""}; !slices.Equal(got, want) {
			t.Fatalf("%v after it was left out: %q, want %q", time.Duration(i)*tick, got, want)
		}
	}
	if got, want := step(true), []string{"good/Gus", "bad/Bo", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("after its keyframe: %q, want %q", got, want)
	}
	if len(c.benched) != 0 {
		t.Errorf("%d cameras still watched after the keyframe", len(c.benched))
	}
}
