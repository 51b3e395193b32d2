package loadgen

import (
	"testing"
	"time"
)

func TestAudioStream(t *testing.T) {
	s := NewAudio()
	for i := 0; i < 100; i++ {
		it := s.Next()
		if it.Size != 252 || it.At != time.Duration(i)*30*time.Millisecond {
			t.Fatalf("packet %d: %+v", i, it)
		}
	}
}

// The video trace matches the seed's description on average.
func TestVideoTraceShape(t *testing.T) {
	s := NewVideo(1)
	perFrame := map[uint32]int{}
	packets, bytes := 0, 0
	const frames = 6000
	for {
		it := s.Next()
		if int(it.TS)/(90000/VideoFPS) >= frames {
			break
		}
		perFrame[it.TS]++
		packets++
		bytes += it.Size
	}
	ppf := float64(packets) / frames
	avg := float64(bytes) / float64(packets)
	kbps := float64(bytes) * 8 / (frames / VideoFPS) / 1000
	t.Logf("%.2f packets/frame, %.0f bytes/packet, %.0f kb/s", ppf, avg, kbps)
	if ppf < 2.9 || ppf > 3.3 {
		t.Errorf("packets per frame %.2f, want ≈3.1", ppf)
	}
	if avg < 700 || avg > 790 {
		t.Errorf("average packet %.0f bytes, want ≈740", avg)
	}
	if kbps < 255 || kbps > 305 {
		t.Errorf("%.0f kb/s, want ≈280", kbps)
	}
	for f := 0; f < frames; f += VideoIntraEvery {
		if n := perFrame[uint32(f*90000/VideoFPS)]; n < 10 || n > 18 {
			t.Fatalf("full-picture update %d has %d packets", f, n)
		}
	}
	a, b := NewVideo(7), NewVideo(7)
	for i := 0; i < 1000; i++ {
		if a.Next() != b.Next() {
			t.Fatal("trace not deterministic")
		}
	}
}

func TestPacketRoundTrip(t *testing.T) {
	buf := make([]byte, 1500)
	in := Packet{Seq: 65535, TS: 1 << 31, SSRC: 42, SendNs: 123456789012, Meeting: 7, Index: 99999}
	b := Build(buf, 252, 96, true, in)
	if len(b) != 252 {
		t.Fatalf("len %d", len(b))
	}
	out, ok := Parse(b)
	if !ok || out != in {
		t.Fatalf("got %+v ok=%v", out, ok)
	}
	if _, ok := Parse(b[:20]); ok {
		t.Fatal("short packet parsed")
	}
}
