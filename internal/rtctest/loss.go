package rtctest

import (
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pion/interceptor"
)

// Loss is an interceptor that drops the first copy of every Every-th
// received video packet, before the NACK generator sees it, and counts
// how many of those arrive again (retransmitted after a NACK).
type Loss struct {
	Every     int
	dropped   atomic.Int64
	recovered atomic.Int64
}

// Dropped is how many packets were dropped; Recovered how many of them
// arrived again.
func (l *Loss) Dropped() int64   { return l.dropped.Load() }
func (l *Loss) Recovered() int64 { return l.recovered.Load() }

// NewInterceptor implements interceptor.Factory.
func (l *Loss) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &lossInterceptor{l: l, lost: map[uint64]bool{}}, nil
}

type lossInterceptor struct {
	interceptor.NoOp
	l    *Loss
	mu   sync.Mutex
	n    int
	lost map[uint64]bool // ssrc<<16 | seq: dropped, not yet seen again
}

// BindRemoteStream drops and watches video packets.
func (i *lossInterceptor) BindRemoteStream(info *interceptor.StreamInfo, r interceptor.RTPReader) interceptor.RTPReader {
	if !strings.HasPrefix(strings.ToLower(info.MimeType), "video/") || i.l.Every < 2 {
		return r
	}
	return interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		for {
			n, a2, err := r.Read(b, a)
			if err != nil || n < 12 {
				return n, a2, err
			}
			key := uint64(binary.BigEndian.Uint32(b[8:12]))<<16 | uint64(binary.BigEndian.Uint16(b[2:4]))
			i.mu.Lock()
			drop := false
			if i.lost[key] {
				delete(i.lost, key)
				i.l.recovered.Add(1)
			} else if i.n++; i.n%i.l.Every == 0 && len(i.lost) < 1000 {
				i.lost[key] = true
				i.l.dropped.Add(1)
				drop = true
			}
			i.mu.Unlock()
			if !drop {
				return n, a2, err
			}
		}
	})
}
