package relay

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
)

// bufSize bounds Options.MaxPacket, the largest datagram relayed; larger
// ones are dropped as oversize (RTP over UDP stays under the path MTU).
const bufSize = 2048

const maxEvents = 256

// worker forwards the packets of the streams given to it: one goroutine
// blocked in epoll_wait over all their sockets, reading each ready socket
// with one recvmmsg and sending what it read with sendmmsg from the same
// buffers. Only the worker touches its sockets' descriptors after they are
// watched, and it closes them itself (retire), so a descriptor number is
// never reused while the worker may still use it.
type worker struct {
	r          *Relay
	epfd, evfd int
	stopping   atomic.Bool

	mu      sync.Mutex
	retired []retireReq

	// Scratch for the forwarding loop, owned by the worker goroutine.
	events []unix.EpollEvent
	rmsgs  []unix.Mmsghdr
	riov   []unix.Iovec
	names  [][unix.SizeofSockaddrInet6]byte
	bufs   []byte
	smsgs  []unix.Mmsghdr
	siov   []unix.Iovec
	sfd    []int
	scratch

	c counters
}

// scratch holds one batch's tallies before they reach the shared counters.
type scratch struct {
	in, inBytes, out, outBytes uint64
	drops                      [numDrops]uint64
}

type retireReq struct {
	st   *stream
	done chan struct{}
}

func newWorker(r *Relay) (*worker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("relay: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		closeFD(epfd)
		return nil, fmt.Errorf("relay: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd), Pad: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		closeFD(epfd)
		closeFD(evfd)
		return nil, fmt.Errorf("relay: epoll_ctl: %w", err)
	}
	b := r.o.Batch
	w := &worker{r: r, epfd: epfd, evfd: evfd,
		events: make([]unix.EpollEvent, maxEvents),
		rmsgs:  make([]unix.Mmsghdr, b), riov: make([]unix.Iovec, b),
		names: make([][unix.SizeofSockaddrInet6]byte, b), bufs: make([]byte, b*bufSize),
		smsgs: make([]unix.Mmsghdr, b), siov: make([]unix.Iovec, b), sfd: make([]int, b),
	}
	for i := 0; i < b; i++ {
		w.riov[i].Base = &w.bufs[i*bufSize]
		w.rmsgs[i].Hdr.Iov = &w.riov[i]
		w.rmsgs[i].Hdr.Iovlen = 1
		w.rmsgs[i].Hdr.Name = &w.names[i][0]
		w.smsgs[i].Hdr.Iov = &w.siov[i]
		w.smsgs[i].Hdr.Iovlen = 1
	}
	return w, nil
}

// watch adds s to the worker's epoll set; idx comes back with its events.
func (w *worker) watch(s *sock, idx int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.fd), Pad: int32(idx)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
		return fmt.Errorf("relay: epoll_ctl add: %w", err)
	}
	return nil
}

func (w *worker) unwatch(s *sock) { _ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, s.fd, nil) }

// retire queues st for closing by the worker and wakes it.
func (w *worker) retire(st *stream) chan struct{} {
	done := make(chan struct{})
	w.mu.Lock()
	w.retired = append(w.retired, retireReq{st, done})
	w.mu.Unlock()
	w.wake()
	return done
}

func (w *worker) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(w.evfd, one[:])
}

func (w *worker) stop() {
	w.stopping.Store(true)
	w.wake()
}

func (w *worker) closeFDs() {
	closeFD(w.epfd)
	closeFD(w.evfd)
}

// reap closes the retired streams; only between epoll_waits, when no event
// of theirs is pending in w.events.
func (w *worker) reap() {
	w.mu.Lock()
	rs := w.retired
	w.retired = nil
	w.mu.Unlock()
	for _, rq := range rs {
		w.r.freeStream(rq.st)
		close(rq.done)
	}
}

func (w *worker) run() {
	var drain [8]byte
	for {
		w.reap()
		if w.stopping.Load() {
			return
		}
		n, err := unix.EpollWait(w.epfd, w.events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			w.r.log.Error("epoll_wait failed; worker stops", "err", err)
			return
		}
		for i := 0; i < n; i++ {
			ev := &w.events[i]
			if ev.Pad < 0 {
				_, _ = unix.Read(w.evfd, drain[:])
				continue
			}
			s := w.r.socks[ev.Pad].Load()
			if s == nil || s.fd != int(ev.Fd) {
				continue
			}
			w.serve(s)
		}
	}
}

// serve reads one batch from s and forwards it.
func (w *worker) serve(s *sock) {
	b := len(w.rmsgs)
	for i := 0; i < b; i++ {
		w.rmsgs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		w.rmsgs[i].Hdr.Flags = 0
		w.riov[i].Len = bufSize
	}
	r1, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&w.rmsgs[0])), uintptr(b),
		unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		if e != unix.EAGAIN && e != unix.EINTR {
			w.c.drops[dropReadError].Add(1)
		}
		return
	}
	n := int(r1)
	x := s.side
	st := x.st
	k := w.forward(s, x, n)
	w.send(k)
	// Hand the flow to the kernel only after this batch is sent, so that
	// packets it forwards do not overtake the ones read here.
	if k > 0 && w.r.k != nil && s.kstate.Load() == kNone {
		idx := 0
		if s.rtcp {
			idx = 1
		}
		w.r.kinstall(s, x, idx)
	}
	st.call.packets.Add(uint64(n))
	w.flush()
}

// forward checks, latches and addresses the n datagrams just read on s,
// which belongs to side x; it fills the send batch and returns its length.
func (w *worker) forward(s *sock, x *side, n int) int {
	y := x.other
	raw := x.st.raw.Load()
	mux := x.mux.Load()
	idx := 0
	if s.rtcp {
		idx = 1
	}
	k := 0
	for i := 0; i < n; i++ {
		m := &w.rmsgs[i]
		l := int(m.Len)
		w.in++
		w.inBytes += uint64(l)
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 || l > w.r.o.MaxPacket {
			w.drops[dropOversize]++
			continue
		}
		buf := w.bufs[i*bufSize : i*bufSize+l]
		rtcp := s.rtcp
		if !raw {
			var c media.Class
			if s.rtcp {
				c = media.ClassifyRTCP(buf)
			} else {
				c = media.Classify(buf, mux)
			}
			switch c {
			case media.ClassRTP:
			case media.ClassRTCP:
				rtcp = true
			case media.ClassBadVersion:
				w.drops[dropNotRTP]++
				continue
			default:
				w.drops[dropTruncated]++
				continue
			}
		}
		// Symmetric RTP (RFC 4961): the party's first packet tells where it
		// really is; after that only that address may speak for it.
		// Only a source that passes the side's latch policy (latch.go) may
		// latch or take over.
		p := x.remote[idx].Load()
		if p == nil || !p.latched || !p.addr.sameAddr(&w.names[i], m.Hdr.Namelen) {
			latched := p != nil && p.latched
			ap := fromRaw(&w.names[i], m.Hdr.Namelen)
			if !ap.IsValid() || !x.mayLatch(idx, ap, latched, w.r.o.clock) {
				if latched {
					w.drops[dropSource]++
				} else {
					w.drops[dropRefused]++
				}
				continue
			}
			if x.remote[idx].CompareAndSwap(p, &peer{addr: toRaw(ap), ap: ap, latched: true}) && (p == nil || p.ap != ap) {
				w.r.kflush(x.st) // flows toward x were built from its SDP address or the old latch
			}
		}
		out, di := y.rtp, 0
		if rtcp && !y.mux.Load() {
			out, di = y.rtcp, 1
		}
		dp := y.remote[di].Load()
		if !dp.known() {
			w.drops[dropNoPeer]++
			continue
		}
		sm := &w.smsgs[k]
		sm.Hdr.Name = &dp.addr.b[0]
		sm.Hdr.Namelen = dp.addr.n
		w.siov[k].Base = &buf[0]
		w.siov[k].Len = uint64(l)
		w.sfd[k] = out.fd
		k++
	}
	return k
}

// send sends the first k messages of the send batch, one sendmmsg per run of
// messages from the same socket. A message the kernel refuses is dropped.
func (w *worker) send(k int) {
	for i := 0; i < k; {
		j := i + 1
		for j < k && w.sfd[j] == w.sfd[i] {
			j++
		}
		for i < j {
			r1, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(w.sfd[i]), uintptr(unsafe.Pointer(&w.smsgs[i])),
				uintptr(j-i), unix.MSG_DONTWAIT, 0, 0)
			if e != 0 || r1 == 0 {
				w.drops[dropSend]++
				i++
				continue
			}
			for _, m := range w.smsgs[i : i+int(r1)] {
				w.out++
				w.outBytes += uint64(m.Len)
			}
			i += int(r1)
		}
	}
}

// flush adds the batch's tallies to the shared counters.
func (w *worker) flush() {
	w.c.in.Add(w.in)
	w.c.inBytes.Add(w.inBytes)
	w.c.out.Add(w.out)
	w.c.outBytes.Add(w.outBytes)
	for i, d := range w.drops {
		if d != 0 {
			w.c.drops[i].Add(d)
		}
	}
	w.scratch = scratch{}
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}
