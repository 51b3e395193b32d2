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

// StallAt is the wait past which a send or read is a stall, heard by the
// hook set with OnStall.
const StallAt = 100 * time.Millisecond

var stallHook atomic.Pointer[func(time.Duration)]

// OnStall sets f to hear every wait past StallAt (a writer's flush or a
// datagram read), on the goroutine that measured it; f must return at
// once. Nil removes it.
func OnStall(f func(time.Duration)) {
	if f == nil {
		stallHook.Store(nil)
		return
	}
	stallHook.Store(&f)
}

func (d *delays) observe(t time.Duration) {
	if t > StallAt {
		if h := stallHook.Load(); h != nil {
			(*h)(t)
		}
	}
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
