package udpmux

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
)

// maxBatch is the number of datagrams per sendmmsg call. The kernel takes at
// most UIO_MAXIOV (1024); smaller batches let audio overtake video sooner.
const maxBatch = 256

type entry struct {
	p *media.Packet
	d *Dest
}

// writer owns the sending side of a socket. Producers append to the
// queues under mu; one goroutine (run) swaps them out and sends.
type writer struct {
	conn  *net.UDPConn
	fd    int        // a blocking sending socket of its own (senders.go); -1: send on conn
	v6    bool       // the socket is AF_INET6
	mm    *mmsgBatch // nil: one sendto per datagram
	limit int        // bound of each queue

	mu       sync.Mutex
	q        [2][]entry   // by media.Kind
	since    [2]time.Time // when queue k's oldest packet was queued
	sleeping bool
	closing  bool
	holds    int // while > 0, send leaves a sleeping run asleep (Socket.Hold)
	wake     chan struct{}
	audioLen atomic.Int32 // mirrors len(q[Audio]) for the lock-free peek

	drops   atomic.Uint64 // dropped because a queue was full or closing
	batches atomic.Uint64
	delay   delays // of each flush's oldest packet, queued until sent
	done    chan struct{}

	// owned by run
	spare [2][]entry
}

// newWriter returns a writer for conn; batch sends with sendmmsg (v6: the
// socket is AF_INET6). fd >= 0 is a sending socket of the writer's own,
// which it sends on instead of conn and closes when it is done.
func newWriter(conn *net.UDPConn, raw syscall.RawConn, batch, v6 bool, fd, limit int) *writer {
	w := &writer{conn: conn, fd: fd, v6: v6, limit: limit, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if batch {
		w.mm = newMmsgBatch(raw, fd, v6, &w.batches)
	}
	return w
}

// send queues p for d. It takes over one reference to p and never blocks.
func (w *writer) send(p *media.Packet, d *Dest) bool {
	if d.inflight.Add(1) > d.limit {
		d.inflight.Add(-1)
		d.drops.Add(1)
		p.Release()
		return false
	}
	k := p.Kind
	w.mu.Lock()
	if w.closing || len(w.q[k]) >= w.limit {
		w.mu.Unlock()
		d.inflight.Add(-1)
		d.drops.Add(1)
		w.drops.Add(1)
		p.Release()
		return false
	}
	if len(w.q[k]) == 0 {
		w.since[k] = time.Now()
	}
	w.q[k] = append(w.q[k], entry{p, d})
	if k == media.Audio {
		w.audioLen.Store(int32(len(w.q[k])))
	}
	wake := w.sleeping && w.holds == 0
	if wake {
		w.sleeping = false
	}
	w.mu.Unlock()
	if wake {
		w.wake <- struct{}{}
	}
	return true
}

// hold keeps send from waking run until the matching release.
func (w *writer) hold() {
	w.mu.Lock()
	w.holds++
	w.mu.Unlock()
}

// release ends a hold, waking run if it sleeps on queued packets.
func (w *writer) release() {
	w.mu.Lock()
	w.holds--
	wake := w.holds == 0 && w.sleeping && len(w.q[media.Audio])+len(w.q[media.Video]) > 0
	if wake {
		w.sleeping = false
	}
	w.mu.Unlock()
	if wake {
		w.wake <- struct{}{}
	}
}

// take swaps out queue k, waiting while both are empty, with when its
// oldest packet was queued. It returns false when the writer is closing
// and everything has been sent.
func (w *writer) take() (batch []entry, since time.Time, ok bool) {
	w.mu.Lock()
	for len(w.q[media.Audio]) == 0 && len(w.q[media.Video]) == 0 {
		if w.closing {
			w.mu.Unlock()
			return nil, time.Time{}, false
		}
		w.sleeping = true
		w.mu.Unlock()
		<-w.wake
		w.mu.Lock()
	}
	k := media.Audio
	if len(w.q[k]) == 0 {
		k = media.Video
	}
	batch, since = w.swap(k), w.since[k]
	w.mu.Unlock()
	return batch, since, true
}

// swap is called with mu held.
func (w *writer) swap(k media.Kind) []entry {
	b := w.q[k]
	w.q[k] = w.spare[k][:0]
	w.spare[k] = nil
	if k == media.Audio {
		w.audioLen.Store(0)
	}
	return b
}

func (w *writer) recycle(k media.Kind, b []entry) {
	clear(b)
	w.mu.Lock()
	if w.spare[k] == nil {
		w.spare[k] = b[:0]
	}
	w.mu.Unlock()
}

func (w *writer) run() {
	defer close(w.done)
	if w.fd >= 0 {
		defer unix.Close(w.fd)
	}
	for {
		batch, since, ok := w.take()
		if !ok {
			return
		}
		k := batch[0].p.Kind
		for i := 0; i < len(batch); i += maxBatch {
			w.flush(batch[i:min(i+maxBatch, len(batch))], since)
			if k == media.Video && w.audioLen.Load() > 0 {
				w.mu.Lock()
				audio, asince := w.swap(media.Audio), w.since[media.Audio]
				w.mu.Unlock()
				for j := 0; j < len(audio); j += maxBatch {
					w.flush(audio[j:min(j+maxBatch, len(audio))], asince)
				}
				w.recycle(media.Audio, audio)
			}
		}
		w.recycle(k, batch)
	}
}

// flush sends up to maxBatch entries, the oldest queued at since, and
// releases them. Its delay is counted when the last of them has been
// handed to the kernel: a writer the machine stopped in the middle of a
// batch (its thread descheduled) made the rest of the batch wait as much
// as a long queue would.
func (w *writer) flush(es []entry, since time.Time) {
	switch {
	case w.mm != nil:
		w.mm.send(es)
	case w.fd >= 0:
		for _, e := range es {
			if sendto(w.fd, w.v6, e.p.Bytes(), e.d) != 0 {
				e.d.errors.Add(1)
			} else {
				e.d.sent.Add(1)
				e.d.bytes.Add(uint64(e.p.Len()))
			}
		}
	default:
		for _, e := range es {
			if _, err := w.conn.WriteToUDP(e.p.Bytes(), e.d.udpAddr); err != nil {
				e.d.errors.Add(1)
			} else {
				e.d.sent.Add(1)
				e.d.bytes.Add(uint64(e.p.Len()))
			}
		}
	}
	w.delay.observe(time.Since(since))
	for _, e := range es {
		e.d.inflight.Add(-1)
		e.p.Release()
	}
}

// close stops accepting packets, lets run send what is queued and waits.
func (w *writer) close() {
	w.mu.Lock()
	w.closing = true
	wake := w.sleeping
	w.sleeping = false
	w.mu.Unlock()
	if wake {
		w.wake <- struct{}{}
	}
	<-w.done
}

// pending returns the number of queued datagrams.
func (w *writer) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q[media.Audio]) + len(w.q[media.Video])
}
