package rtctest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
)

// Cap is an interceptor that drops received RTP above a bit rate: a
// constrained downlink for simulcast tests. Set changes the rate (0: no
// cap).
type Cap struct {
	bps atomic.Int64
}

// Set sets the cap in bit/s; 0 removes it.
func (c *Cap) Set(bps int64) { c.bps.Store(bps) }

// NewInterceptor implements interceptor.Factory.
func (c *Cap) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &capInterceptor{c: c, last: time.Now()}, nil
}

type capInterceptor struct {
	interceptor.NoOp
	c      *Cap
	mu     sync.Mutex
	tokens float64 // bits
	last   time.Time
}

func (i *capInterceptor) allow(n int) bool {
	bps := i.c.bps.Load()
	if bps == 0 {
		return true
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	now := time.Now()
	i.tokens = min(i.tokens+now.Sub(i.last).Seconds()*float64(bps), float64(bps)/10) // 100 ms of burst
	i.last = now
	if i.tokens < float64(n*8) {
		return false
	}
	i.tokens -= float64(n * 8)
	return true
}

// BindRemoteStream drops what is over the cap before anything else reads it.
func (i *capInterceptor) BindRemoteStream(_ *interceptor.StreamInfo, r interceptor.RTPReader) interceptor.RTPReader {
	return interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		for {
			n, a2, err := r.Read(b, a)
			if err != nil || i.allow(n) {
				return n, a2, err
			}
		}
	})
}
