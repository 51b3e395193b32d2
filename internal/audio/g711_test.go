package audio

import (
	"math"
	"testing"
)

// Code points from the G.711 tables: silence, the largest magnitudes, and
// the sign bit.
func TestG711KnownValues(t *testing.T) {
	for _, c := range []struct {
		s     int16
		mu, a byte
	}{
		{0, 0xff, 0xd5},
		{-1, 0x7f, 0x55},
		{32767, 0x80, 0xaa},
		{-32768, 0x00, 0x2a},
	} {
		if got := MulawEncode(c.s); got != c.mu {
			t.Errorf("MulawEncode(%d) = %#x, want %#x", c.s, got, c.mu)
		}
		if got := AlawEncode(c.s); got != c.a {
			t.Errorf("AlawEncode(%d) = %#x, want %#x", c.s, got, c.a)
		}
	}
	if MulawDecode(0xff) != 0 || MulawDecode(0x80) != 32124 || MulawDecode(0x00) != -32124 {
		t.Errorf("μ-law decode: 0xff→%d 0x80→%d 0x00→%d, want 0, 32124, -32124", MulawDecode(0xff), MulawDecode(0x80), MulawDecode(0x00))
	}
	if AlawDecode(0xd5) != 8 || AlawDecode(0xaa) != 32256 || AlawDecode(0x2a) != -32256 {
		t.Errorf("A-law decode: 0xd5→%d 0xaa→%d 0x2a→%d, want 8, 32256, -32256", AlawDecode(0xd5), AlawDecode(0xaa), AlawDecode(0x2a))
	}
}

// Every code decodes to a value that encodes back to the same code (μ-law's
// two zeros aside), and every sample survives a round trip within its
// segment's quantization step.
func TestG711RoundTrip(t *testing.T) {
	for b := range 256 {
		if got := MulawEncode(MulawDecode(byte(b))); got != byte(b) && !(b == 0x7f && got == 0xff) {
			t.Errorf("μ-law %#x → %d → %#x", b, MulawDecode(byte(b)), got)
		}
		if got := AlawEncode(AlawDecode(byte(b))); got != byte(b) {
			t.Errorf("A-law %#x → %d → %#x", b, AlawDecode(byte(b)), got)
		}
	}
	for s := -32768; s <= 32767; s += 7 {
		for name, rt := range map[string]func(int16) int16{
			"μ-law": func(x int16) int16 { return MulawDecode(MulawEncode(x)) },
			"A-law": func(x int16) int16 { return AlawDecode(AlawEncode(x)) },
		} {
			got := int(rt(int16(s)))
			// Step size grows with the magnitude: at most 1/16 of it, plus
			// the smallest step, plus clipping at the top.
			bound := math.Abs(float64(s))/16 + 40
			if math.Abs(float64(got-s)) > bound && math.Abs(float64(s)) < 32000 {
				t.Fatalf("%s round trip of %d gave %d", name, s, got)
			}
			if (s > 100 && got <= 0) || (s < -100 && got >= 0) {
				t.Fatalf("%s round trip of %d changed its sign: %d", name, s, got)
			}
		}
	}
}

// A sine through G.711 keeps a signal-to-noise ratio near the codec's
// (about 38 dB for a loud tone).
func TestG711SNR(t *testing.T) {
	for name, rt := range map[string]func(int16) int16{
		"μ-law": func(x int16) int16 { return MulawDecode(MulawEncode(x)) },
		"A-law": func(x int16) int16 { return AlawDecode(AlawEncode(x)) },
	} {
		var sig, noise float64
		for i := range 8000 {
			s := int16(16000 * math.Sin(2*math.Pi*1000*float64(i)/8000+0.3))
			d := float64(rt(s)) - float64(s)
			sig += float64(s) * float64(s)
			noise += d * d
		}
		if snr := 10 * math.Log10(sig/noise); snr < 33 {
			t.Errorf("%s SNR %.1f dB, want at least 33", name, snr)
		}
	}
}

func BenchmarkMulawEncode(b *testing.B) {
	src := make([]int16, 160)
	for i := range src {
		src[i] = int16(10000 * math.Sin(float64(i)/3))
	}
	dst := make([]byte, 160)
	for b.Loop() {
		EncodeMulaw(dst, src)
	}
}
