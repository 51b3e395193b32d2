package broker

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
)

// vp8 publishes one VP8 packet on tr: a keyframe's first packet or a
// delta frame's (RFC 7741 §4.2–4.3: S=1, PID 0; the payload header's P
// bit is 0 on a keyframe), with SSRC 1, sequence number 1, timestamp 9.
func vp8(tr *Track, key bool) { vp8At(tr, key, 1, 1, 9) }

func vp8At(tr *Track, key bool, ssrc uint32, seq uint16, ts uint32) {
	p := media.NewPacket()
	b := p.Buffer()
	b[0], b[1] = 0x80, 96
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], ts)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	b[12], b[13] = 0x10, 0x01
	if key {
		b[13] = 0x00
	}
	p.SetLen(20)
	tr.Publish(p)
}

// TestLayerPick: a receiver that is not Layered gets, of a simulcast
// camera whose top (primary) layer never comes, the highest layer heard
// within Recent; it changes up to a new layer on that layer's keyframe
// (until then it gets the old one), down when its layer has been silent
// for Recent, asks the publisher for the keyframe it waits for and asks
// again after askAgain.
func TestLayerPick(t *testing.T) {
	r := NewRoom("s")
	now := time.Unix(1000, 0)
	r.SetClock(func() time.Time { return now })
	var got []string
	type numbers struct {
		ssrc uint32
		seq  uint16
		ts   uint32
	}
	var out []numbers // every packet the receiver got
	sink := SinkFunc(func(p *media.Packet, from *Track) {
		got = append(got, from.Publisher())
		b := p.Bytes()
		out = append(out, numbers{binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:])})
		p.Release()
	})
	if _, err := r.Join(Member{ID: "plain", Kind: media.Video, Receives: true, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	var asks [3]atomic.Int32
	var layers [3]*Track
	for i, id := range []string{"l", "m", "h"} {
		tr, err := r.Join(Member{ID: id, Kind: media.Video, Sends: true, Owner: "ada", Keyframe: func() { asks[i].Add(1) },
			Info: TrackInfo{Codec: "video/VP8", Stream: "ada-camera", Layer: i + 1, Primary: i == 2}})
		if err != nil {
			t.Fatal(err)
		}
		layers[i] = tr
	}
	l, m := layers[0], layers[1]
	// Each layer its own SSRC, sequence numbers (the middle one's wrap)
	// and timestamps, 30 fps.
	ssrc := map[*Track]uint32{l: 11, m: 22}
	seq := map[*Track]uint16{l: 100, m: 65530}
	ts := map[*Track]uint32{l: 5000, m: 4_000_000_000}
	step := func(what string, d time.Duration, tr *Track, key bool, want string) {
		t.Helper()
		now = now.Add(d)
		got = nil
		seq[tr]++
		ts[tr] += 3000
		vp8At(tr, key, ssrc[tr], seq[tr], ts[tr])
		if (len(got) == 1 && got[0] != want) || (len(got) == 0) != (want == "") {
			t.Errorf("%s: the receiver got %v, want %q", what, got, want)
		}
	}
	step("the first packet, low layer", 0, l, true, "l")
	step("a delta frame of the middle layer", 10*time.Millisecond, m, false, "")
	step("the low layer while waiting", 10*time.Millisecond, l, false, "l")
	if a := asks[1].Load(); a != 1 {
		t.Errorf("the middle layer was asked for %d keyframes, want 1", a)
	}
	step("the middle layer's keyframe", 10*time.Millisecond, m, true, "m")
	step("the low layer after the change", 10*time.Millisecond, l, false, "")
	step("the middle layer", 10*time.Millisecond, m, false, "m")
	if r.Best(l) != m {
		t.Errorf("Best = %s, want the middle layer", r.Best(l).Publisher())
	}

	// The middle layer goes silent: after Recent the low one, from its keyframe.
	asked := asks[0].Load()
	step("the low layer before Recent", Recent/2, l, false, "")
	step("the low layer after Recent", Recent, l, false, "")
	if a := asks[0].Load() - asked; a != 1 {
		t.Errorf("the low layer was asked for %d keyframes on the change down, want 1", a)
	}
	step("the low layer, still no keyframe", askAgain, l, false, "")
	if a := asks[0].Load() - asked; a != 2 {
		t.Errorf("the low layer was asked %d times, want 2 (again after askAgain)", a)
	}
	step("the low layer's keyframe", 10*time.Millisecond, l, true, "l")
	if r.Best(m) != l {
		t.Errorf("Best = %s, want the low layer", r.Best(m).Publisher())
	}
	if asks[2].Load() != 0 {
		t.Error("the top layer, never heard, was asked for a keyframe")
	}
	// One stream across the changes: the first layer's SSRC, sequence
	// numbers on by one, timestamps forward.
	for i, o := range out {
		if o.ssrc != 11 {
			t.Errorf("packet %d: SSRC %d, want the first layer's (11)", i, o.ssrc)
		}
		if i > 0 && (o.seq != out[i-1].seq+1 || int32(o.ts-out[i-1].ts) <= 0) {
			t.Errorf("packet %d: seq %d ts %d after seq %d ts %d", i, o.seq, o.ts, out[i-1].seq, out[i-1].ts)
		}
	}

	// A layer that leaves is no longer picked; the last one's leaving
	// takes the pick away.
	r.Leave("l")
	r.Leave("m")
	r.Leave("h")
	if n := len(r.picks); n != 0 {
		t.Errorf("%d picks left after the source left", n)
	}
}

// TestOneStreamFollowsFrom: a OneStream receiver (a video phone that
// follows the speaker) moved from one camera to another by SetFrom gets
// them as one stream: the first camera's packets as they came, then,
// after each change, the new camera's from its keyframe (asked for; its
// delta frames before it dropped) with the first camera's SSRC, sequence
// numbers on by one and timestamps forward, also after a time of hearing
// no track; cameras that named no codec count as VP8. Its pick goes when
// it leaves.
func TestOneStreamFollowsFrom(t *testing.T) {
	r := NewRoom("s")
	now := time.Unix(1000, 0)
	r.SetClock(func() time.Time { return now })
	type numbers struct {
		ssrc uint32
		seq  uint16
		ts   uint32
	}
	var got []string
	var out []numbers
	sink := SinkFunc(func(p *media.Packet, from *Track) {
		got = append(got, from.Publisher())
		b := p.Bytes()
		out = append(out, numbers{binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:])})
		p.Release()
	})
	if _, err := r.Join(Member{ID: "phone", Kind: media.Video, Receives: true, Sink: sink, Owner: "m_phone", From: "-", OneStream: true}); err != nil {
		t.Fatal(err)
	}
	var asks [2]atomic.Int32
	var cams [2]*Track
	for i, id := range []string{"red", "green"} {
		info := TrackInfo{Codec: "video/VP8"}
		if i == 1 {
			info = TrackInfo{} // a plain RTP camera
		}
		tr, err := r.Join(Member{ID: id, Kind: media.Video, Sends: true, Owner: "m_" + id, Keyframe: func() { asks[i].Add(1) }, Info: info})
		if err != nil {
			t.Fatal(err)
		}
		cams[i] = tr
	}
	red, green := cams[0], cams[1]
	// Each camera its own SSRC, sequence numbers (green's behind red's, as
	// a decoder's reorder buffer would drop them) and timestamps.
	ssrc := map[*Track]uint32{red: 11, green: 22}
	seq := map[*Track]uint16{red: 3000, green: 100}
	ts := map[*Track]uint32{red: 5000, green: 4_000_000_000}
	step := func(what string, d time.Duration, tr *Track, key bool, want string) {
		t.Helper()
		now = now.Add(d)
		got = nil
		seq[tr]++
		ts[tr] += 6000
		vp8At(tr, key, ssrc[tr], seq[tr], ts[tr])
		if (len(got) == 1 && got[0] != want) || (len(got) == 0) != (want == "") {
			t.Errorf("%s: the receiver got %v, want %q", what, got, want)
		}
	}
	step("nobody's", 0, red, true, "")
	r.SetFrom("phone", "m_red")
	step("red's first packet, a delta frame", 66*time.Millisecond, red, false, "red")
	step("red", 66*time.Millisecond, red, false, "red")
	step("green, not followed", 66*time.Millisecond, green, true, "")
	if out[0] != (numbers{11, 3002, 17000}) {
		t.Errorf("the first packet went out as %+v, want as it came", out[0])
	}

	r.SetFrom("phone", "m_green")
	step("red, unsubscribed", 66*time.Millisecond, red, true, "")
	step("green's delta frame", 66*time.Millisecond, green, false, "")
	if a := asks[1].Load(); a != 1 {
		t.Errorf("green was asked for %d keyframes, want 1", a)
	}
	step("green's delta frame, before askAgain", 66*time.Millisecond, green, false, "")
	step("green's delta frame, after askAgain", askAgain, green, false, "")
	if a := asks[1].Load(); a != 2 {
		t.Errorf("green was asked for %d keyframes, want 2 (again after askAgain)", a)
	}
	step("green's keyframe", 66*time.Millisecond, green, true, "green")
	step("green", 66*time.Millisecond, green, false, "green")

	// Nobody's for a while, then red again: still the one stream.
	r.SetFrom("phone", "-")
	step("green, unsubscribed", 66*time.Millisecond, green, false, "")
	r.SetFrom("phone", "m_red")
	step("red's delta frame", 3*time.Second, red, false, "")
	step("red's keyframe", 66*time.Millisecond, red, true, "red")
	step("red", 66*time.Millisecond, red, false, "red")
	if asks[0].Load() == 0 {
		t.Error("red was not asked for a keyframe on the change back")
	}
	for i, o := range out {
		if o.ssrc != 11 {
			t.Errorf("packet %d: SSRC %d, want the first camera's (11)", i, o.ssrc)
		}
		if i > 0 && (o.seq != out[i-1].seq+1 || int32(o.ts-out[i-1].ts) <= 0) {
			t.Errorf("packet %d: seq %d ts %d after seq %d ts %d", i, o.seq, o.ts, out[i-1].seq, out[i-1].ts)
		}
	}
	if len(out) != 6 {
		t.Errorf("the receiver got %d packets, want 6", len(out))
	}
	// The gap of 3 s without a track shows in the timestamps (90 kHz).
	if d := out[4].ts - out[3].ts; d < 3*90000 {
		t.Errorf("the timestamps ran on %d over the 3 s gap", d)
	}
	r.Leave("phone")
	if n := len(r.picks); n != 0 {
		t.Errorf("%d picks left after the OneStream member left", n)
	}
}

// BenchmarkLayerPick: a simulcast camera's two layers published to a
// receiver that is not Layered (one layerPick), after it changed from the
// low one to the other: per packet the clock read, the choice, the pick's
// lock and for the one passed on a pooled copy with its numbers
// rewritten; no allocation.
func BenchmarkLayerPick(b *testing.B) {
	r := NewRoom("s")
	sink := SinkFunc(func(p *media.Packet, _ *Track) { p.Release() })
	if _, err := r.Join(Member{ID: "plain", Kind: media.Video, Receives: true, Sink: sink}); err != nil {
		b.Fatal(err)
	}
	var layers [2]*Track
	for i := range layers {
		tr, err := r.Join(Member{ID: string(rune('a' + i)), Kind: media.Video, Sends: true, Owner: "ada",
			Info: TrackInfo{Codec: "video/VP8", Stream: "ada-camera", Layer: i + 1}})
		if err != nil {
			b.Fatal(err)
		}
		layers[i] = tr
	}
	vp8(layers[0], true)
	vp8(layers[1], true) // the change: from now on copies
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		vp8(layers[i%2], false)
	}
}
