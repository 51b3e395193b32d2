package audio

import (
	"math"
	"testing"
)

func sine(freq, rate, n int, amp float64) []int16 {
	f := make([]int16, n)
	for i := range f {
		f[i] = int16(amp * math.Sin(2*math.Pi*float64(freq)*float64(i)/float64(rate)))
	}
	return f
}

// power of one frequency in a signal (a single DFT bin), normalized.
func tone(x []int16, freq, rate int) float64 {
	var re, im float64
	for i, s := range x {
		a := 2 * math.Pi * float64(freq) * float64(i) / float64(rate)
		re += float64(s) * math.Cos(a)
		im += float64(s) * math.Sin(a)
	}
	return math.Hypot(re, im) / float64(len(x))
}

func TestMixMinusExcludesOwnVoice(t *testing.T) {
	a, b, c := sine(440, 8000, 160, 8000), sine(1000, 8000, 160, 8000), sine(2000, 8000, 160, 8000)
	out := [][]int16{make([]int16, 160), make([]int16, 160), make([]int16, 160), make([]int16, 160)}
	// Listeners: a, b, c speak; the fourth only listens.
	MixMinus(out, [][]int16{a, b, c, nil}, [][]int16{a, b, c}, make([]int32, 160))
	for l, want := range [][3]bool{{false, true, true}, {true, false, true}, {true, true, false}, {true, true, true}} {
		for k, f := range []int{440, 1000, 2000} {
			heard := tone(out[l], f, 8000) > 1000
			if heard != want[k] {
				t.Errorf("listener %d hears %d Hz: %v, want %v", l, f, heard, want[k])
			}
		}
	}
	// Clipping, not wrapping.
	loud := make([]int16, 4)
	for i := range loud {
		loud[i] = 30000
	}
	o := [][]int16{make([]int16, 4)}
	MixMinus(o, [][]int16{nil}, [][]int16{loud, loud}, make([]int32, 4))
	if o[0][0] != 32767 {
		t.Errorf("two loud speakers mix to %d, want 32767 (clipped)", o[0][0])
	}
}

func TestLevel(t *testing.T) {
	if got := Level(make([]int16, 160)); got != 127 {
		t.Errorf("silence: %d, want 127", got)
	}
	if got := Level(sine(1000, 8000, 160, 32767)); got > 1 {
		t.Errorf("full-scale sine: %d, want 0", got)
	}
	if got := Level(sine(1000, 8000, 160, 32767/10)); got < 19 || got > 21 {
		t.Errorf("-20 dB sine: %d, want 20", got)
	}
}

// A tone keeps its frequency and level through every conversion, in 20 ms
// frames, and a tone above the lower rate's Nyquist frequency is filtered
// out when downsampling.
func TestResampler(t *testing.T) {
	rates := []int{8000, 16000, 48000}
	for _, from := range rates {
		for _, to := range rates {
			r, err := NewResampler(from, to)
			if err != nil {
				t.Fatal(err)
			}
			in := sine(1000, from, from, 10000) // one second
			var out []int16
			frame := from / 50
			buf := make([]int16, r.OutLen(frame))
			for i := 0; i+frame <= len(in); i += frame {
				n := r.Resample(buf, in[i:i+frame])
				out = append(out, buf[:n]...)
			}
			if len(out) < to*99/100 || len(out) > to*101/100 {
				t.Errorf("%d→%d: %d samples for one second", from, to, len(out))
				continue
			}
			body := out[len(out)/4 : len(out)*3/4] // past the filter's start
			if a := tone(body, 1000, to) * 2; a < 10000*0.85 || a > 10000*1.15 {
				t.Errorf("%d→%d: 1 kHz amplitude %.0f, want about 10000", from, to, a)
			}
			if other := tone(body, 1500, to) * 2; other > 300 {
				t.Errorf("%d→%d: energy at 1.5 kHz %.0f (distortion)", from, to, other)
			}
		}
	}
	r, _ := NewResampler(48000, 8000)
	in := sine(6000, 48000, 48000, 10000) // above 4 kHz: must not alias to 2 kHz
	out := make([]int16, r.OutLen(len(in)))
	n := r.Resample(out, in)
	if alias := tone(out[n/4:n*3/4], 2000, 8000) * 2; alias > 100 {
		t.Errorf("6 kHz at 48 kHz aliases into 8 kHz at amplitude %.0f", alias)
	}
	if _, err := NewResampler(44100, 8000); err == nil {
		t.Error("44.1 kHz accepted")
	}
}

func FuzzResample(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, from, to uint8) {
		rates := []int{8000, 16000, 48000}
		r, _ := NewResampler(rates[int(from)%3], rates[int(to)%3])
		src := make([]int16, len(b)/2)
		for i := range src {
			src[i] = int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
		dst := make([]int16, r.OutLen(len(src)))
		if n := r.Resample(dst, src); n > len(dst) {
			t.Fatalf("wrote %d into %d", n, len(dst))
		}
	})
}

func BenchmarkMixMinus10(b *testing.B) {
	frames := make([][]int16, 10)
	out := make([][]int16, 10)
	for i := range frames {
		frames[i] = sine(300+100*i, 8000, 160, 3000)
		out[i] = make([]int16, 160)
	}
	sum := make([]int32, 160)
	for b.Loop() {
		MixMinus(out, frames, frames[:6], sum)
	}
}
