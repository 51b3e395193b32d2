package sfu

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// readBatchMax is the most datagrams one recvmmsg(2) takes off the single
// port's socket.
const readBatchMax = 32

// readDatagram is a read slot's size: pion's mux reads into 8 KiB, and a
// datagram the slot cannot hold whole must not be cut where recvfrom into
// the mux's buffer would not have cut it.
const readDatagram = 8192

// recvBatch is the read side of batchConn. pion's mux reads the port one
// datagram a call; under load the socket holds many, and each read was a
// system call of its own. ReadFromAddrPort now hands out what one
// recvmmsg took, and calls it again only when those are gone. On an idle
// port recvmmsg returns the one datagram there is at once, so nothing
// waits for a batch to fill: batches form only when datagrams queue.
type recvBatch struct {
	mu   sync.Mutex // one reader at a time (the mux has one)
	pc   *ipv4.PacketConn
	msgs []ipv4.Message
	bufs [][readDatagram]byte
	n, i int // msgs[i:n] are read and not yet handed out

	// Counted for metrics: recvmmsg calls that returned datagrams, and
	// the datagrams they returned.
	calls, datagrams atomic.Uint64
}

func newRecvBatch(pc *ipv4.PacketConn) *recvBatch {
	r := &recvBatch{pc: pc, msgs: make([]ipv4.Message, readBatchMax), bufs: make([][readDatagram]byte, readBatchMax)}
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{r.bufs[i][:]}
	}
	return r
}

// read copies the next datagram into b, as recvfrom would: a b too small
// for it gets its first len(b) bytes.
func (r *recvBatch) read(b []byte) (int, netip.AddrPort, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.i >= r.n {
		n, err := r.pc.ReadBatch(r.msgs, 0)
		if err != nil {
			return 0, netip.AddrPort{}, err
		}
		r.i, r.n = 0, n
		if n > 0 {
			r.calls.Add(1)
			r.datagrams.Add(uint64(n))
		}
	}
	m := &r.msgs[r.i]
	r.i++
	var from netip.AddrPort
	if a, ok := m.Addr.(*net.UDPAddr); ok {
		from = a.AddrPort()
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	}
	return copy(b, r.bufs[r.i-1][:m.N]), from, nil
}
