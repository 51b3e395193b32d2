package udpmux

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
)

// readBatch is the number of datagrams one recvmmsg call takes at most.
//
// The reader is a single goroutine that the Go scheduler treats as any
// other. Under load it is runnable far more often than it runs (a trace of
// a node at its limit: runnable 27 % of the time, waits up to 33 ms), and
// what it does while it runs is mostly the system call per datagram. One
// call per burst lets it empty the socket's queue in a fraction of its
// turn.
const readBatch = 32

// recvBatch reads datagrams with recvmmsg(2) into pooled packets. Its
// headers, iovecs, addresses and control buffers are built once; only the
// packets a call filled are replaced. It is owned by the reader goroutine.
type recvBatch struct {
	raw   syscall.RawConn
	pkts  [readBatch]*media.Packet
	hdrs  [readBatch]mmsghdr
	iovs  [readBatch]unix.Iovec
	names [readBatch]unix.RawSockaddrInet6
	oobs  [readBatch][]byte
	info  bool // control messages asked for (recvinfo.go)

	// lastOOB is the control messages of the datagram take handed over
	// last (nil without them); valid until the next read.
	lastOOB []byte

	n   int           // datagrams the last call read
	err syscall.Errno // the last call's error
	fn  func(fd uintptr) bool
}

func newRecvBatch(raw syscall.RawConn, info bool) *recvBatch {
	b := &recvBatch{raw: raw, info: info}
	for i := range b.hdrs {
		b.pkts[i] = media.NewPacket()
		buf := b.pkts[i].Buffer()
		b.iovs[i].Base = &buf[0]
		b.iovs[i].SetLen(len(buf))
		h := &b.hdrs[i].hdr
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		if info {
			b.oobs[i] = make([]byte, oobSize)
			h.Control = &b.oobs[i][0]
		}
	}
	b.fn = b.recv
	return b
}

// read waits for datagrams and reads up to readBatch of them; the caller
// then takes each with take. A non-nil error is the socket's (closed).
func (b *recvBatch) read() (int, error) {
	for {
		for i := range b.hdrs {
			h := &b.hdrs[i].hdr
			h.Namelen = unix.SizeofSockaddrInet6
			if b.info {
				h.SetControllen(oobSize)
			}
			h.Flags = 0
		}
		b.n, b.err = 0, 0
		// RawConn.Read calls fn until it returns true, waiting in the
		// poller whenever it returns false (nothing to read).
		if err := b.raw.Read(b.fn); err != nil {
			return 0, err
		}
		if b.err == 0 {
			return b.n, nil
		}
		if b.err != unix.EINTR {
			return 0, b.err
		}
	}
}

// recv is RawConn.Read's function: one recvmmsg on the non-blocking socket.
func (b *recvBatch) recv(fd uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), readBatch, 0, 0, 0)
	if e == unix.EAGAIN {
		return false
	}
	b.n, b.err = int(r), e
	return true
}

// take hands over datagram i of the last read (its packet, its length as
// the kernel gave it, and its source; its control messages are lastOOB)
// and puts a fresh packet in its place.
func (b *recvBatch) take(i int) (p *media.Packet, n int, from netip.AddrPort) {
	p, n = b.pkts[i], int(b.hdrs[i].n)
	from = sockaddrPort(&b.names[i], b.hdrs[i].hdr.Namelen)
	b.lastOOB = nil
	if b.info {
		b.lastOOB = b.oobs[i][:min(int(b.hdrs[i].hdr.Controllen), len(b.oobs[i]))]
	}
	b.pkts[i] = media.NewPacket()
	buf := b.pkts[i].Buffer()
	b.iovs[i].Base = &buf[0]
	return p, n, from
}

// release gives back the packets not handed over (the socket is closing).
func (b *recvBatch) release() {
	for i, p := range b.pkts {
		if p != nil {
			p.Release()
			b.pkts[i] = nil
		}
	}
}

// sockaddrPort reads a sockaddr_in or sockaddr_in6 the kernel wrote.
func sockaddrPort(sa *unix.RawSockaddrInet6, l uint32) netip.AddrPort {
	raw := (*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(sa))
	port := binary.BigEndian.Uint16(raw[2:4])
	switch {
	case sa.Family == unix.AF_INET && l >= unix.SizeofSockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), port)
	case sa.Family == unix.AF_INET6 && l >= unix.SizeofSockaddrInet6:
		a := netip.AddrFrom16([16]byte(raw[8:24]))
		if sa.Scope_id != 0 {
			// A link-local source: named by its interface, as the net
			// package names it (rare: a lookup, not on the fast path).
			if ifi, err := net.InterfaceByIndex(int(sa.Scope_id)); err == nil {
				a = a.WithZone(ifi.Name)
			} else {
				a = a.WithZone(strconv.FormatUint(uint64(sa.Scope_id), 10))
			}
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}
