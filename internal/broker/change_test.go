package broker

import (
	"sync/atomic"
	"testing"

	"github.com/convene/convene/internal/media"
)

// TestSubscriptionChanges: OnChange fires for the members whose
// subscriptions a join, leave or subgroup move changed, and Subscribed lists
// what they hear; receivers that are not Layered are subscribed to every
// layer too (through a layerPick, which passes one on).
func TestSubscriptionChanges(t *testing.T) {
	r := NewRoom("s")
	var changes atomic.Int32
	sink := SinkFunc(func(p *media.Packet, _ *Track) { p.Release() })
	if _, err := r.Join(Member{ID: "rx", Kind: media.Video, Receives: true, Sink: sink, Layered: true,
		OnChange: func() { changes.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "plain", Kind: media.Video, Receives: true, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	for i, primary := range []bool{false, false, true} {
		if _, err := r.Join(Member{ID: "l" + string(rune('1'+i)), Kind: media.Video, Sends: true,
			Info: TrackInfo{Codec: "video/VP8", Stream: "m-camera", Layer: i + 1, Primary: primary}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := changes.Load(); got != 3 {
		t.Errorf("OnChange called %d times for three new layers, want 3", got)
	}
	if got := r.Subscribed("rx"); len(got) != 3 {
		t.Errorf("the layered receiver hears %d tracks, want 3", len(got))
	}
	if plain := r.Subscribed("plain"); len(plain) != 3 {
		t.Errorf("the plain receiver is subscribed to %d layers, want 3", len(plain))
	}
	r.SetGroup("rx", "g")
	if got := r.Subscribed("rx"); len(got) != 0 {
		t.Errorf("after moving to another subgroup rx hears %d tracks", len(got))
	}
	before := changes.Load()
	r.SetGroup("rx", "")
	r.Leave("l1")
	if got := changes.Load() - before; got != 2 {
		t.Errorf("OnChange called %d times for a move back and a leave, want 2", got)
	}
	if got := r.Subscribed("rx"); len(got) != 2 {
		t.Errorf("rx hears %d tracks after a layer left, want 2", len(got))
	}
	tr := r.Subscribed("rx")[0]
	if _, ok := tr.PayloadType(); ok {
		t.Error("a payload type before any packet")
	}
	p := media.NewPacket()
	copy(p.Buffer(), []byte{0x80, 0x60, 0, 1})
	p.SetLen(12)
	tr.Publish(p)
	if pt, ok := tr.PayloadType(); !ok || pt != 96 {
		t.Errorf("PayloadType = %d %v, want 96", pt, ok)
	}
}
