package broker

import (
	"testing"

	"github.com/convene/convene/internal/media"
)

// TestWatchers: a sending member's OnSubscribers hears its subscriber
// count (members and taps) change, and the room's OnSenders hears tracks
// come, move subgroup and go.
func TestWatchers(t *testing.T) {
	r := NewRoom("s")
	var counts []int
	senders := 0
	r.SetOnSenders(func() { senders++ })
	drop := SinkFunc(func(p *media.Packet, _ *Track) { p.Release() })
	tr, err := r.Join(Member{ID: "remote", Kind: media.Audio, Sends: true, Owner: "m1",
		OnSubscribers: func(n int) { counts = append(counts, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "l1", Kind: media.Audio, Receives: true, Sink: drop, Owner: "m2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "echo", Kind: media.Audio, Receives: true, Sink: drop, Owner: "m1"}); err != nil {
		t.Fatal(err)
	}
	untap := r.Tap(tr, "rec", drop)
	untap()
	r.Leave("l1")
	r.SetGroup("remote", "g")
	r.Leave("remote")
	want := []int{0, 1, 2, 1, 0}
	if len(counts) != len(want) {
		t.Fatalf("subscriber counts %v, want %v", counts, want)
	}
	for i := range want {
		if counts[i] != want[i] {
			t.Fatalf("subscriber counts %v, want %v", counts, want)
		}
	}
	if senders != 3 {
		t.Errorf("OnSenders called %d times, want 3 (join, subgroup, leave)", senders)
	}
	if got := r.Senders(); len(got) != 0 {
		t.Errorf("senders after leave: %v", got)
	}
}
