package chatbench

import (
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	at := time.Unix(1_764_000_000, 123_456_789)
	p := Stamp{Step: 2561, Sent: at}.AppendTo([]byte("x"), 64)
	if len(p) != 65 || p[0] != 'x' || p[64] != '.' {
		t.Fatalf("%d bytes: %q", len(p), p)
	}
	s, ok := ReadStamp(p[1:])
	if !ok || s.Step != 2561 || !s.Sent.Equal(at) {
		t.Fatalf("read %+v %v", s, ok)
	}
	if short := (Stamp{Step: 1, Sent: at}).AppendTo(nil, 0); len(short) != StampLen {
		t.Fatalf("a stamp alone is %d bytes", len(short))
	}
	if _, ok := ReadStamp(p[1:StampLen]); ok {
		t.Fatal("a payload shorter than a stamp read as one")
	}
}

func TestHist(t *testing.T) {
	for us := uint64(0); us < 1<<20; us++ {
		i := bucket(us)
		if i > 0 && bucket(us-1) > i {
			t.Fatalf("bucket(%d) = %d below bucket(%d)", us, i, us-1)
		}
		if m := mid(i); m < float64(us)*0.96 || m > float64(us)*1.04+1 {
			t.Fatalf("%d µs in bucket %d, middle %.1f", us, i, m)
		}
	}
	var h, o hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	o.add(-time.Second) // counted as 0
	h.merge(&o)
	l := h.latency()
	if l.N != 101 || l.Max != 100 || l.P50 < 48 || l.P50 > 52 || l.P99 < 97 || l.P99 > 100 {
		t.Fatalf("%+v", l)
	}
	if (&hist{}).latency() != (Latency{}) {
		t.Fatal("an empty histogram has figures")
	}
}
