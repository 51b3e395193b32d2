package audio

import (
	"math"
	"testing"
)

// TestStretchKeepsPitch: at 0.5×, 1× and 2× a 440 Hz tone comes out
// 1/speed as long, still at 440 Hz, without clicks (no sample-to-sample
// jump larger than the tone's own).
func TestStretchKeepsPitch(t *testing.T) {
	for _, rate := range []int{8000, 48000} {
		for _, speed := range []float64{0.5, 1, 1.5, 2} {
			in := sine(440, rate, 2*rate, 8000) // 2 s
			s := NewStretcher(rate, speed)
			var out []int16
			buf := make([]int16, 480)
			for i := 0; i < len(in); i += rate / 50 { // 20 ms pushes, as packets come
				s.Push(in[i:min(i+rate/50, len(in))])
				for s.Available() > 0 {
					out = append(out, buf[:s.Pull(buf)]...)
				}
			}
			want := float64(len(in)) / speed
			if got := float64(len(out)); math.Abs(got-want) > 0.05*want {
				t.Errorf("%d Hz at %.1f×: %d samples out of %d, want about %.0f", rate, speed, len(out), len(in), want)
			}
			body := out[rate/10 : len(out)-rate/10] // leave the ramps at the ends
			share := WindowedToneShare(body, 440, rate)
			t.Logf("%d Hz at %.1f×: %d samples of %d, %.3f of the energy at 440 Hz, %.3f at %.0f Hz", rate, speed, len(out), len(in),
				share, WindowedToneShare(body, 440*speed, rate), 440*speed)
			if share < 0.9 {
				t.Errorf("%d Hz at %.1f×: %.2f of the energy at 440 Hz, want the tone at its own pitch", rate, speed, share)
			}
			maxStep := 2 * math.Pi * 440 / float64(rate) * 8000 * 1.1
			for i := 1; i < len(body); i++ {
				if d := math.Abs(float64(body[i]) - float64(body[i-1])); d > maxStep {
					t.Fatalf("%d Hz at %.1f×: a click at sample %d (a jump of %.0f)", rate, speed, i, d)
				}
			}
		}
	}
}

func TestStretchReset(t *testing.T) {
	s := NewStretcher(8000, 2)
	s.Push(sine(440, 8000, 4000, 8000))
	s.Reset()
	if s.Available() != 0 {
		t.Fatal("output left after Reset")
	}
	s.Push(sine(440, 8000, 1600, 8000))
	if s.Available() == 0 {
		t.Fatal("no output after Reset and new input")
	}
}

func BenchmarkStretch48k(b *testing.B) {
	in := sine(440, 48000, 960, 8000)
	s := NewStretcher(48000, 1.5)
	buf := make([]int16, 960)
	b.SetBytes(960 * 2)
	for range b.N {
		s.Push(in)
		for s.Available() > 0 {
			s.Pull(buf)
		}
	}
}
