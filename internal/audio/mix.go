package audio

import "math"

// MixMinus mixes the frames of the active speakers and writes, for each
// listener, the mix without the listener's own frame: out[i] = sum - own[i],
// clipped to 16 bits. own[i] is nil for a listener who is not among the
// speakers (it hears everyone). All frames have the same length; sum is
// scratch space of that length.
func MixMinus(out [][]int16, own [][]int16, speakers [][]int16, sum []int32) {
	for i := range sum {
		sum[i] = 0
	}
	for _, f := range speakers {
		for i, s := range f {
			sum[i] += int32(s)
		}
	}
	for l, dst := range out {
		mine := own[l]
		for i := range dst {
			v := sum[i]
			if mine != nil {
				v -= int32(mine[i])
			}
			dst[i] = Sat16(v)
		}
	}
}

// Sat16 clips a sum of samples to 16 bits.
func Sat16(v int32) int16 {
	switch {
	case v > math.MaxInt16:
		return math.MaxInt16
	case v < math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}

// Level is a frame's level as RFC 6464 writes it: -dBov, 0 (loudest) to
// 127 (silence), from the RMS against a full-scale sine's.
func Level(frame []int16) uint8 {
	if len(frame) == 0 {
		return 127
	}
	var e float64
	for _, s := range frame {
		e += float64(s) * float64(s)
	}
	rms := math.Sqrt(e / float64(len(frame)))
	if rms < 1 {
		return 127
	}
	db := 20 * math.Log10(rms/(32767/math.Sqrt2))
	return uint8(min(127, max(0, math.Round(-db))))
}
