package sfu

import (
	"testing"

	"github.com/convene/convene/internal/session"
)

// TestLinkCountsMatchStats: the counts a WebRTC link gives the capacity
// governor (session.Service.Counts) are what its Stats say.
func TestLinkCountsMatchStats(t *testing.T) {
	u := &upTrack{}
	u.packets.Add(7)
	u.bytes.Add(700)
	for name, m := range map[string]interface {
		Counts() (in, out, queueFull uint64)
		Stats() session.LinkStats
	}{"publisher": pubMedia{u: u}, "subscriber": recvMedia{}} {
		in, out, q := m.Counts()
		s := m.Stats()
		if in != s.PacketsIn || out != s.PacketsOut || q != s.Dropped["queue_full"] {
			t.Errorf("%s: Counts %d/%d/%d, Stats %d/%d/%d", name, in, out, q, s.PacketsIn, s.PacketsOut, s.Dropped["queue_full"])
		}
	}
	if in, _, _ := (pubMedia{u: u}).Counts(); in != 7 {
		t.Errorf("publisher Counts in = %d, want 7", in)
	}
}
