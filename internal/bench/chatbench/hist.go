package chatbench

import (
	"math/bits"
	"time"
)

// hist counts latencies in log-linear buckets of microseconds: one a
// microsecond below 32 µs, then 32 a power of two (each ≤ 3 % wide), so a
// step's millions of deliveries cost a few kilobytes per client.
type hist struct {
	b   [histBuckets]uint64
	n   uint64
	sum time.Duration
	max time.Duration
}

const (
	histSub     = 32 // buckets a power of two
	histBuckets = histSub * 40
)

func bucket(us uint64) int {
	if us < histSub {
		return int(us)
	}
	e := bits.Len64(us) - 6 // us>>e is in [32, 64)
	return min(histBuckets-1, histSub*(e+1)+int(us>>e)-histSub)
}

// mid is the middle of bucket i, in microseconds.
func mid(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	e := i/histSub - 1
	lo := uint64(i%histSub+histSub) << e
	return float64(lo) + float64(uint64(1)<<e)/2
}

func (h *hist) add(d time.Duration) {
	d = max(d, 0)
	h.b[bucket(uint64(d/time.Microsecond))]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *hist) merge(o *hist) {
	for i, v := range o.b {
		h.b[i] += v
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile is the p-quantile in milliseconds (0 when empty).
func (h *hist) quantile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := uint64(p * float64(h.n))
	var acc uint64
	for i, v := range h.b {
		acc += v
		if acc > want {
			return min(mid(i), float64(h.max/time.Microsecond)) / 1000
		}
	}
	return float64(h.max/time.Microsecond) / 1000
}

// Latency summarizes latencies in milliseconds.
type Latency struct {
	N    uint64  `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func (h *hist) latency() Latency {
	if h.n == 0 {
		return Latency{}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Latency{N: h.n, Mean: ms(h.sum / time.Duration(h.n)), P50: h.quantile(0.5), P99: h.quantile(0.99), Max: ms(h.max)}
}
