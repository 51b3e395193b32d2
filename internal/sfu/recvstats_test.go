package sfu

import (
	"testing"
	"time"

	"github.com/pion/rtcp"
)

func TestRecvStatsAcrossAWrap(t *testing.T) {
	var r recvStats
	t0 := time.Unix(1000, 0)
	seq, ts := uint16(65530), uint32(1000)
	for i := range 20 {
		if i == 7 || i == 8 { // two lost
			seq++
			ts += 960
			continue
		}
		r.add(seq, ts, t0.Add(time.Duration(i)*20*time.Millisecond), 48000)
		seq++
		ts += 960
	}
	if got, want := r.extHighest(), uint32(1<<16|13); got != want {
		t.Fatalf("extended highest %#x, want %#x", got, want)
	}
	if r.expected() != 20 || r.received != 18 || r.lost() != 2 {
		t.Fatalf("expected %d received %d lost %d", r.expected(), r.received, r.lost())
	}
	if r.jitter > 1 {
		t.Fatalf("jitter %.1f for packets on time", r.jitter)
	}
	var rr rtcp.ReceptionReport
	r.report(&rr)
	if rr.TotalLost != 2 || rr.FractionLost != 2*256/20 || rr.LastSequenceNumber != 1<<16|13 {
		t.Fatalf("report %+v", rr)
	}
	r.report(&rr) // nothing new: nothing lost in the interval
	if rr.FractionLost != 0 || rr.TotalLost != 2 {
		t.Fatalf("second report %+v", rr)
	}
	// A late packet from before the wrap is not a new cycle.
	r.add(65533, 0, t0.Add(time.Second), 0)
	if r.extHighest() != 1<<16|13 || r.lost() != 1 {
		t.Fatalf("after a late packet: highest %#x lost %d", r.extHighest(), r.lost())
	}
}

func TestRecvStatsRolloverCount(t *testing.T) {
	var r recvStats
	if r.rocFor(5) != 0 {
		t.Fatal("a stream not started has wrapped")
	}
	now := time.Now()
	r.add(65534, 0, now, 0)
	r.add(65535, 0, now, 0)
	if got := r.rocFor(0); got != 1 {
		t.Fatalf("the packet after 65535: ROC %d, want 1", got)
	}
	if got := r.rocFor(65533); got != 0 {
		t.Fatalf("a late packet before the wrap: ROC %d, want 0", got)
	}
	r.add(0, 0, now, 0)
	if got := r.rocFor(1); got != 1 {
		t.Fatalf("after the wrap: ROC %d, want 1", got)
	}
}

func TestRecvStatsJitter(t *testing.T) {
	var r recvStats
	t0 := time.Unix(1000, 0)
	for i := range 200 {
		late := time.Duration(0)
		if i%2 == 1 {
			late = 10 * time.Millisecond // every other packet 10 ms late: 480 units at 48 kHz
		}
		r.add(uint16(i), uint32(i*960), t0.Add(time.Duration(i)*20*time.Millisecond+late), 48000)
	}
	if r.jitter < 400 || r.jitter > 490 {
		t.Fatalf("jitter %.0f, want about 480", r.jitter)
	}
}
