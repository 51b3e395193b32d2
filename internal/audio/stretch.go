package audio

import "math"

// Stretcher changes the tempo of speech without changing its pitch: WSOLA
// (waveform-similarity overlap-add, Verhelst and Roelands 1993). Output
// comes in hops of 10 ms, each the overlap-add of two Hann-windowed 20 ms
// segments of the input; a segment is taken near where the tempo says
// (the analysis position advances speed hops per output hop), at the
// offset within ±5 ms whose waveform best continues the segment before
// it, so periods line up and no phase jumps are heard. Speed 1 passes the
// input through (after one hop of delay).
//
// Not safe for concurrent use.
type Stretcher struct {
	speed   float64
	hop     int // output hop H; segments are 2H long
	tol     int // the search reaches ±tol samples
	win     []float32
	in      []float32 // input from inBase on
	ana     float64   // the next segment's nominal start, in input samples from inBase
	prev    int       // the last segment's start (from inBase); -1 before the first
	ola     []float32 // 2H: the overlap-add of the segments not yet output
	out     []int16   // finished output not yet pulled
	started bool
}

// NewStretcher returns a stretcher for audio at rate samples per second.
func NewStretcher(rate int, speed float64) *Stretcher {
	h := rate / 100
	s := &Stretcher{hop: h, tol: rate / 200, win: make([]float32, 2*h), ola: make([]float32, 2*h), prev: -1}
	for i := range s.win { // periodic Hann: hops of H sum to 1
		s.win[i] = float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(2*h)))
	}
	s.SetSpeed(speed)
	return s
}

// SetSpeed sets the tempo: 2 plays twice as fast. Output already made is
// kept.
func (s *Stretcher) SetSpeed(speed float64) { s.speed = speed }

// Reset drops the input and the output not pulled yet (a seek).
func (s *Stretcher) Reset() {
	s.in, s.out, s.ana, s.prev, s.started = s.in[:0], s.out[:0], 0, -1, false
	clear(s.ola)
}

// Push adds input samples.
func (s *Stretcher) Push(pcm []int16) {
	for _, v := range pcm {
		s.in = append(s.in, float32(v))
	}
	s.run()
}

// Available is how many output samples Pull can give.
func (s *Stretcher) Available() int { return len(s.out) }

// Pull moves up to len(dst) output samples into dst and returns how many.
func (s *Stretcher) Pull(dst []int16) int {
	n := copy(dst, s.out)
	s.out = s.out[:copy(s.out, s.out[n:])]
	return n
}

// run makes output hops while the input holds what they need.
func (s *Stretcher) run() {
	n := 2 * s.hop
	for {
		nominal := int(math.Round(s.ana))
		lo, hi := max(nominal-s.tol, 0), nominal+s.tol
		if s.prev < 0 {
			lo, hi = 0, 0
		}
		if hi+n > len(s.in) || (s.prev >= 0 && s.prev+s.hop+n > len(s.in)) {
			break
		}
		q := lo
		if s.prev >= 0 {
			q = s.best(lo, hi, s.prev+s.hop)
		}
		for i := range n {
			s.ola[i] += s.win[i] * s.in[q+i]
		}
		for i := range s.hop {
			s.out = append(s.out, clamp16(s.ola[i]))
		}
		copy(s.ola, s.ola[s.hop:])
		clear(s.ola[n-s.hop:])
		s.prev = q
		s.ana += float64(s.hop) * s.speed
		// Drop input no later search reaches.
		if keep := min(s.prev, int(s.ana)-s.tol); keep > 4*n {
			s.in = s.in[:copy(s.in, s.in[keep:])]
			s.prev -= keep
			s.ana -= float64(keep)
		}
	}
}

// best is the start in [lo, hi] whose segment is most like the natural
// continuation at nat: a coarse search in steps of 4, then ±3 around the
// best, on every other sample.
func (s *Stretcher) best(lo, hi, nat int) int {
	score := func(q int) float64 {
		var xy, yy float64
		for i := 0; i < 2*s.hop; i += 2 {
			x, y := float64(s.in[nat+i]), float64(s.in[q+i])
			xy += x * y
			yy += y * y
		}
		if yy == 0 {
			return 0
		}
		return xy / math.Sqrt(yy)
	}
	bq, bs := lo, math.Inf(-1)
	for q := lo; q <= hi; q += 4 {
		if v := score(q); v > bs {
			bq, bs = q, v
		}
	}
	for q := max(lo, bq-3); q <= min(hi, bq+3); q++ {
		if v := score(q); v > bs {
			bq, bs = q, v
		}
	}
	return bq
}
