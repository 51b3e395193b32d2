package audio

import "math"

// ToneShare is the share of x's energy at freq (x sampled at rate), by the
// Goertzel algorithm: about 1 for a pure tone at freq, about 0 without it.
// Tests use it to tell who hears whom; a DTMF detector could too.
func ToneShare(x []int16, freq float64, rate int) float64 {
	c := 2 * math.Cos(2*math.Pi*freq/float64(rate))
	var s1, s2, e float64
	for _, v := range x {
		f := float64(v)
		s1, s2 = f+c*s1-s2, s1
		e += f * f
	}
	if e == 0 {
		return 0
	}
	return (s1*s1 + s2*s2 - c*s1*s2) / (e * float64(len(x)) / 2)
}

// WindowedToneShare is ToneShare averaged over 100 ms windows: the pitch
// a listener hears, without asking that the tone's phase run on unbroken
// for seconds (a time stretch moves it a little at every splice).
func WindowedToneShare(x []int16, freq float64, rate int) float64 {
	n, sum := 0, 0.0
	for w := rate / 10; len(x) >= w; x = x[w:] {
		sum += ToneShare(x[:w], freq, rate)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
