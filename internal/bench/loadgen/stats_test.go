package loadgen

import (
	"testing"
	"time"
)

// Jitter by RFC 3550 §6.4.1 with known inputs: transit times alternate
// between 10 and 14 ms, so |D| is 4 ms every time after the first, and J
// approaches 4 ms as J(n) = 4 ms·(1 − (15/16)^(n−1)).
func TestJitterKnownInputs(t *testing.T) {
	l := &Listener{Meeting: 1}
	send := int64(0)
	for i := 0; i < Warmup+3; i++ {
		transit := 10 * time.Millisecond
		if i%2 == 1 {
			transit = 14 * time.Millisecond
		}
		l.Observe(Packet{Meeting: 1, Index: uint32(i), SendNs: send}, 252, send+int64(transit))
		send += int64(30 * time.Millisecond)
	}
	// Three counted packets: the first sets the reference, then two steps.
	want := 4e6 / 16          // after one step
	want += (4e6 - want) / 16 // after two
	if got := float64(l.jitter); got < want-1 || got > want+1 {
		t.Fatalf("jitter %.1f ns, want %.1f", got, want)
	}
	if l.Received != 3 {
		t.Fatalf("received %d, want 3 (warm-up ignored)", l.Received)
	}
	if avg := l.AvgLatency(); avg != (10+14+10)*time.Millisecond/3 {
		t.Fatalf("avg latency %v", avg)
	}
}

func TestJitterConstantTransitIsZero(t *testing.T) {
	l := &Listener{}
	for i := 0; i < 500; i++ {
		s := int64(i) * int64(30*time.Millisecond)
		l.Observe(Packet{Index: uint32(i), SendNs: s}, 252, s+int64(3*time.Millisecond))
	}
	if l.Jitter() != 0 || l.AvgLatency() != 3*time.Millisecond {
		t.Fatalf("jitter %v latency %v", l.Jitter(), l.AvgLatency())
	}
}

func TestLateAndLost(t *testing.T) {
	l := &Listener{}
	for i := Warmup; i < Warmup+10; i++ {
		lat := time.Millisecond
		if i%5 == 0 {
			lat = 101 * time.Millisecond
		}
		l.Observe(Packet{Index: uint32(i)}, 252, int64(lat))
	}
	l.Observe(Packet{Meeting: 3, Index: 500}, 252, 0) // another meeting's packet
	if l.LateCount != 2 || l.Received != 10 || l.Foreign != 1 {
		t.Fatalf("late %d received %d foreign %d", l.LateCount, l.Received, l.Foreign)
	}
	if l.Lost(12) != 2 || l.Lost(10) != 0 {
		t.Fatalf("lost %d %d", l.Lost(12), l.Lost(10))
	}
}
