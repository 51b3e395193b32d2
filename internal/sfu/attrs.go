package sfu

import (
	"sync"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
)

// attrsPool holds the interceptor.Attributes maps the send chain borrows.
var attrsPool = sync.Pool{New: func() any { return interceptor.Attributes{} }}

// pooledAttrs is the outermost interceptor of a subscriber connection: it
// lends the rest of the send chain a cleared Attributes map from a pool
// for each packet. pion's track writer passes nil, and GCC then makes a
// map for every video packet to note the TWCC extension ID, a fifth of
// the send path's allocations by size.
//
// Ownership: the map belongs to the chain only for the duration of one
// Write; no interceptor on our send chain (GCC, TWCC numbers, sender
// reports, SRTP) keeps it after Write returns. It is cleared and
// returned to the pool then. Each Write borrows its own, so the writer
// goroutine and a NACK answer may write one stream at once.
type pooledAttrs struct{ interceptor.NoOp }

func (*pooledAttrs) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	if isAudio(info) {
		return w // no interceptor on an audio stream's chain reads the map
	}
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if a != nil {
			return w.Write(h, payload, a)
		}
		a = attrsPool.Get().(interceptor.Attributes)
		n, err := w.Write(h, payload, a)
		clear(a)
		attrsPool.Put(a)
		return n, err
	})
}

// pooledAttrsFactory makes the interceptor for each connection.
type pooledAttrsFactory struct{}

func (pooledAttrsFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &pooledAttrs{}, nil
}
