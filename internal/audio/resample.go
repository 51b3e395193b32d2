package audio

import (
	"fmt"
	"math"
)

// Resampler converts a stream of 16-bit mono PCM between two of the rates
// 8000, 16000 and 48000 Hz. It keeps the tail of the previous frame, so
// frames can be fed one at a time without clicks at their edges.
//
// It upsamples by L, low-pass filters (a windowed-sinc FIR at the lower
// rate's Nyquist frequency, applied polyphase: only the taps that meet
// non-zero input are computed) and downsamples by M.
type Resampler struct {
	up, down int         // L and M
	taps     [][]float32 // per output phase (0..L-1), the filter taps that apply
	hist     []float32   // the last len(taps[0]) input samples
	phase    int         // position in the upsampled stream, mod L
	pos      int         // input samples consumed but not yet output past
}

// tapsPerPhase sets the filter length: tapsPerPhase times the larger of L
// and M taps at the upsampled rate, which gives more than 60 dB of stopband
// attenuation at these ratios.
const tapsPerPhase = 24

// NewResampler returns a resampler from rate from to rate to.
func NewResampler(from, to int) (*Resampler, error) {
	ok := func(r int) bool { return r == 8000 || r == 16000 || r == 48000 }
	if !ok(from) || !ok(to) {
		return nil, fmt.Errorf("audio: rates must be 8000, 16000 or 48000 Hz, not %d→%d", from, to)
	}
	g := gcd(from, to)
	r := &Resampler{up: to / g, down: from / g}
	n := tapsPerPhase * max(r.up, r.down) // filter length at the upsampled rate
	cutoff := 0.5 / float64(max(r.up, r.down)) * 0.92
	h := make([]float64, n)
	mid := float64(n-1) / 2
	for i := range n {
		x := float64(i) - mid
		sinc := 2 * cutoff
		if x != 0 {
			sinc = math.Sin(2*math.Pi*cutoff*x) / (math.Pi * x)
		}
		w := 0.42 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1)) + 0.08*math.Cos(4*math.Pi*float64(i)/float64(n-1)) // Blackman
		h[i] = sinc * w * float64(r.up)
	}
	r.taps = make([][]float32, r.up)
	for p := range r.up {
		for k := p; k < n; k += r.up {
			r.taps[p] = append(r.taps[p], float32(h[k]))
		}
	}
	r.hist = make([]float32, len(r.taps[0]))
	return r, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// OutLen is how many samples Resample writes for n input samples (at most).
func (r *Resampler) OutLen(n int) int { return (n*r.up)/r.down + 1 }

// Resample converts src and writes to dst, which must hold OutLen(len(src))
// samples; it returns how many it wrote.
func (r *Resampler) Resample(dst []int16, src []int16) int {
	if r.up == 1 && r.down == 1 {
		return copy(dst, src)
	}
	out := 0
	for _, s := range src {
		// Shift the new input sample into the history (newest last).
		copy(r.hist, r.hist[1:])
		r.hist[len(r.hist)-1] = float32(s)
		// Output every upsampled position that lands on a multiple of M
		// within this input sample's L positions.
		for ; r.phase < r.up; r.phase += r.down {
			taps := r.taps[r.phase]
			var acc float32
			for k, t := range taps {
				acc += t * r.hist[len(r.hist)-1-k]
			}
			if out < len(dst) {
				dst[out] = clamp16(acc)
				out++
			}
		}
		r.phase -= r.up
	}
	return out
}

func clamp16(v float32) int16 {
	switch {
	case v > 32767:
		return 32767
	case v < -32768:
		return -32768
	}
	return int16(math.Round(float64(v)))
}
