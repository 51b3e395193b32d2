package bridge

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/convene/convene/internal/media"
)

// RecordLen is the bytes a batch adds to each packet it carries: the
// envelope and a 2-byte length (doc.go).
const RecordLen = EnvelopeLen + 2

// DefaultMaxBatch bounds a batch's bytes unless Options.MaxBatch says
// otherwise: a video keyframe's burst fills a few, an audio batch rarely
// one.
const DefaultMaxBatch = 16 << 10

// MaxWaiting bounds the bytes of one kind's batches waiting for one node
// (its connection not keeping up, or the batcher's goroutine not yet run
// after a burst): past it packets for that node are dropped and counted.
// A few video keyframes' bursts fit.
const MaxWaiting = 1 << 20

// appendRecord appends track n's packet to a batch as one record.
func appendRecord(dst []byte, n uint32, kind media.Kind, pkt []byte) []byte {
	dst = appendEnvelope(dst, n, kind, false, "", nil)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(pkt)))
	return append(dst, pkt...)
}

// parseBatch calls fn for each record of a batch, in order; pkt aliases
// msg. It stops at the first malformed record and returns its error (the
// records before it were handed over).
func parseBatch(msg []byte, fn func(n uint32, kind media.Kind, pkt []byte)) error {
	for len(msg) > 0 {
		n, kind, rtcp, rest, err := parseEnvelope(msg)
		if err != nil {
			return err
		}
		if rtcp {
			return ErrRecord
		}
		if len(rest) < 2 {
			return ErrShort
		}
		l := int(binary.BigEndian.Uint16(rest))
		if l == 0 || len(rest) < 2+l {
			return ErrShort
		}
		fn(n, kind, rest[2:2+l])
		msg = rest[2+l:]
	}
	return nil
}

// batcher gathers one kind's packets by the node they go to and publishes
// each node's as one message (a batch) when the oldest has waited the
// window, when a batch is full, or, with no window, as soon as its
// goroutine runs: while it publishes, what arrives meanwhile gathers into
// the next batches. The publisher's goroutine (a broker tap) only copies
// the packet into the batches under a mutex; it never blocks on NATS.
type batcher struct {
	b      *Bridge
	c      Conn
	kind   media.Kind
	window time.Duration
	max    int // bytes of a batch
	limit  int // bytes waiting per node before packets are dropped (MaxWaiting)

	mu      sync.Mutex
	pending map[string]*batch // by node
	ready   []batch           // full batches, oldest first
	out     []batch           // what flush sends (its goroutine's)
	armed   bool              // the goroutine was kicked for what is pending
	spare   [][]byte

	kick, full, done chan struct{}
	end              chan struct{}
}

type batch struct {
	subject string
	buf     []byte
	pkts    int
	waiting int // bytes of this node's full batches in ready
}

func newBatcher(b *Bridge, c Conn, kind media.Kind, window time.Duration, size int) *batcher {
	q := &batcher{b: b, c: c, kind: kind, window: window, max: size, limit: max(MaxWaiting, 4*size), pending: map[string]*batch{},
		kick: make(chan struct{}, 1), full: make(chan struct{}, 1), done: make(chan struct{}), end: make(chan struct{})}
	go q.run()
	return q
}

// add copies track n's packet into the batch of each node in to; it
// releases nothing (the caller keeps its reference).
func (q *batcher) add(pkt []byte, n uint32, kind media.Kind, to []string) {
	need := RecordLen + len(pkt)
	full, kick := false, false
	q.mu.Lock()
	for _, node := range to {
		bt := q.pending[node]
		if bt == nil {
			bt = &batch{subject: batchSubject(node, q.kind, q.b.o.Node)}
			q.pending[node] = bt
		}
		if len(bt.buf) > 0 && len(bt.buf)+need > q.max {
			if bt.waiting+len(bt.buf) > q.limit {
				q.b.drop.Add(1) // the node's connection is not keeping up
				continue
			}
			bt.waiting += len(bt.buf)
			q.ready = append(q.ready, batch{subject: bt.subject, buf: bt.buf, pkts: bt.pkts})
			bt.buf, bt.pkts = q.takeSpare(), 0
			full = true
		}
		if bt.buf == nil {
			bt.buf = q.takeSpare()
		}
		bt.buf = appendRecord(bt.buf, n, kind, pkt)
		bt.pkts++
	}
	if !q.armed {
		q.armed, kick = true, true
	}
	q.mu.Unlock()
	if kick {
		signal(q.kick)
	}
	if full {
		signal(q.full)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (q *batcher) takeSpare() []byte {
	if n := len(q.spare); n > 0 {
		b := q.spare[n-1]
		q.spare = q.spare[:n-1]
		return b[:0]
	}
	return make([]byte, 0, q.max)
}

// run publishes the batches: after a kick it waits the window (cut short
// by a full batch), then sends everything pending; a full batch is sent
// at once.
func (q *batcher) run() {
	defer close(q.end)
	var t *time.Timer
	for {
		full := false
		select {
		case <-q.kick:
		case <-q.full:
			full = true
		case <-q.done:
			q.flush()
			return
		}
		if q.window > 0 && !full {
			if t == nil {
				t = time.NewTimer(q.window)
			} else {
				t.Reset(q.window)
			}
			select {
			case <-t.C:
			case <-q.full:
				t.Stop()
			case <-q.done:
				t.Stop()
				q.flush()
				return
			}
		}
		q.flush()
	}
}

// flush publishes every full and pending batch.
func (q *batcher) flush() {
	q.mu.Lock()
	out := append(q.out[:0], q.ready...)
	clear(q.ready)
	q.ready = q.ready[:0]
	for _, bt := range q.pending {
		bt.waiting = 0
		if bt.pkts > 0 {
			out = append(out, batch{subject: bt.subject, buf: bt.buf, pkts: bt.pkts})
			bt.buf, bt.pkts = nil, 0
		}
	}
	q.armed = false
	q.mu.Unlock()
	for _, bt := range out {
		if err := q.c.Publish(bt.subject, bt.buf); err != nil {
			q.b.drop.Add(uint64(bt.pkts))
		} else {
			q.b.pktsOut.Add(uint64(bt.pkts))
			q.b.bytesOut.Add(uint64(len(bt.buf)))
			q.b.batchesOut.Add(1)
		}
	}
	if len(out) > 0 {
		q.mu.Lock()
		for _, bt := range out {
			if len(q.spare) < 64 {
				q.spare = append(q.spare, bt.buf)
			}
		}
		q.mu.Unlock()
	}
	clear(out)
	q.out = out[:0]
}

// stop sends what is pending and ends the goroutine.
func (q *batcher) stop() {
	close(q.done)
	<-q.end
}
