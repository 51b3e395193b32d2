package udpmux

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr of sendmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// mmsgBatch sends a batch of datagrams with as few sendmmsg calls as the
// kernel allows. Its headers and iovecs are built once; per datagram only
// two pointers and a length are written, each destination's sockaddr being
// pre-built in its Dest. It is owned by one writer goroutine.
type mmsgBatch struct {
	raw     syscall.RawConn // the shared socket, when fd < 0
	fd      int             // a blocking sending socket of the writer's own, or -1
	v6      bool
	hdrs    [maxBatch]mmsghdr
	iovs    [maxBatch]unix.Iovec
	batches *atomic.Uint64

	// the batch in progress, for writeFn
	es    []entry
	off   int
	errno syscall.Errno
	fn    func(fd uintptr) bool // w.write, bound once so sending allocates nothing
}

func newMmsgBatch(raw syscall.RawConn, fd int, v6 bool, batches *atomic.Uint64) *mmsgBatch {
	m := &mmsgBatch{raw: raw, fd: fd, v6: v6, batches: batches}
	for i := range m.hdrs {
		m.hdrs[i].hdr.Iov = &m.iovs[i]
		m.hdrs[i].hdr.SetIovlen(1)
	}
	m.fn = m.write
	return m
}

// send sends es (at most maxBatch), counting each datagram as sent or as
// an error on its destination.
func (m *mmsgBatch) send(es []entry) {
	for i, e := range es {
		b := e.p.Bytes()
		h := &m.hdrs[i].hdr
		if len(b) > 0 {
			m.iovs[i].Base = &b[0]
		}
		m.iovs[i].SetLen(len(b))
		// An AF_INET socket cannot reach an IPv6 destination: given the
		// IPv6 sockaddr, the kernel refuses that datagram alone.
		if m.v6 || !e.d.isV4 {
			h.Name = (*byte)(unsafe.Pointer(&e.d.sa6))
			h.Namelen = unix.SizeofSockaddrInet6
		} else {
			h.Name = (*byte)(unsafe.Pointer(&e.d.sa4))
			h.Namelen = unix.SizeofSockaddrInet4
		}
	}
	m.es, m.off = es, 0
	for m.off < len(es) {
		if m.fd >= 0 {
			if !m.write(uintptr(m.fd)) && !waitWritable(m.fd) {
				// No room for a whole wait: count the datagram as an error.
				m.errno = unix.EAGAIN
			}
		} else if err := m.raw.Write(m.fn); err != nil {
			// RawConn.Write calls fn until it returns true, waiting in the
			// poller for the socket to be writable whenever it returns false.
			// The socket is closed: nothing more can be sent.
			for _, e := range es[m.off:] {
				e.d.errors.Add(1)
			}
			break
		}
		if m.errno != 0 {
			// The datagram at off failed (e.g. no route); skip it.
			m.es[m.off].d.errors.Add(1)
			m.off++
			m.errno = 0
		}
	}
	for i := range es {
		m.iovs[i].Base = nil
		m.hdrs[i].hdr.Name = nil
	}
	m.es = nil
}

// write is called by RawConn.Write with the socket's descriptor.
func (m *mmsgBatch) write(fd uintptr) bool {
	for m.off < len(m.es) {
		n := len(m.es) - m.off
		// Raw: on a non-blocking socket the call never blocks (senders.go).
		r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[m.off])), uintptr(n), 0, 0, 0)
		m.batches.Add(1)
		switch {
		case e == unix.EAGAIN:
			return false
		case e == unix.EINTR:
			continue
		case e != 0:
			m.errno = e
			return true
		}
		for _, x := range m.es[m.off : m.off+int(r)] {
			x.d.sent.Add(1)
			x.d.bytes.Add(uint64(x.p.Len()))
		}
		m.off += int(r)
	}
	return true
}
