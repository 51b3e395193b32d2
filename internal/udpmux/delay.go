package udpmux

import (
	"sync/atomic"
	"time"
)

// DelayBuckets are the upper bounds, in seconds, of the delay histograms:
// the writers' queueing (Stats.Delay), from a packet queued for a
// destination until the system call that sends it (the batch's last), and the reader's
// (Stats.ReadDelay), from a datagram's arrival in the socket's queue until
// the reader takes it.
var DelayBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5}

// delays is a histogram of waits. The writers count each flush once, from
// its oldest packet's queueing to its last datagram handed to the kernel:
// the node's own share of a plain RTP listener's latency, as an upper
// bound for the packets sent with it (one clock read a flush, none a
// packet). The reader counts each datagram.
type delays struct {
	n   [11]atomic.Uint64 // by bucket, the last past every bound
	sum atomic.Int64      // nanoseconds
}

func (d *delays) observe(t time.Duration) {
	i := 0
	for i < len(DelayBuckets) && t.Seconds() > DelayBuckets[i] {
		i++
	}
	d.n[i].Add(1)
	d.sum.Add(int64(t))
}

// Delay is a histogram of waits: Counts[i] flushes (or datagrams read)
// within DelayBuckets[i] (not cumulative; the last past every bound).
type Delay struct {
	Counts []uint64
	Sum    time.Duration
}

func (d *delays) add(to *Delay) {
	if to.Counts == nil {
		to.Counts = make([]uint64, len(d.n))
	}
	for i := range d.n {
		to.Counts[i] += d.n[i].Load()
	}
	to.Sum += time.Duration(d.sum.Load())
}
