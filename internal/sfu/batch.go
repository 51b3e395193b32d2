package sfu

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// batchMax is the number of datagrams one sendmmsg call carries at most,
// and so the most a burst's packet waits behind others in the batch.
const batchMax = 64

// maxDatagram bounds what a queued datagram may hold; a larger one (none
// that pion sends on a 1500-byte path) goes out on its own.
const maxDatagram = 1500

// batchConn is the single UDP port's socket as pion's UDP mux sees it.
// While one of the SFU's writer goroutines holds it (hold, release), a
// write is copied into a pending batch and returns at once; the batch goes
// out in one sendmmsg(2) when it is full or when the last writer releases
// it, the end of a burst. Without a holder (RTCP from pion's goroutines,
// NACK answers, ICE, DTLS) a write goes straight to the socket.
//
// sendto is the node's largest single cost per packet; sendmmsg pays the
// system call's entry and exit once a batch instead of once a datagram.
//
// Order: batches are taken and sent one at a time under sendMu, each
// holding every write queued before it was taken, so datagrams leave in
// the order their writes returned. A subscriber's packets are written by
// one writer goroutine, so they keep their order. A direct write (no
// holder) may overtake queued ones; those are RTCP, STUN, DTLS and
// retransmissions, whose order relative to media does not matter.
//
// Only for an IPv4 socket: golang.org/x/net marshals an IPv4 destination
// as sockaddr_in, which a dual-stack IPv6 socket refuses.
type batchConn struct {
	*net.UDPConn // reads, deadlines, addresses, Close
	pc           *ipv4.PacketConn

	mu      sync.Mutex // guards holders, pending, free
	holders int
	pending *batch
	free    []*batch

	sendMu sync.Mutex // one batch on the socket at a time, in order

	// Counted for metrics: sendmmsg batches, the datagrams in them, and
	// those the kernel refused.
	batches, datagrams, failed atomic.Uint64
	// directAudio and directVideo count the datagrams the direct path
	// (direct.go) queued.
	directAudio, directVideo atomic.Uint64
	// in, if set, takes publishers' audio as it is read (direct_in.go).
	in *directIn
}

// batch is one sendmmsg call's datagrams. The conn owns every batch:
// msgs[i].Buffers[0] points into bufs[i] and msgs[i].Addr at addrs[i], so
// queuing a datagram allocates nothing.
type batch struct {
	n     int
	msgs  [batchMax]ipv4.Message
	bufs  [batchMax][maxDatagram]byte
	addrs [batchMax]net.UDPAddr
	ips   [batchMax][4]byte
	vecs  [batchMax][1][]byte
}

func newBatchConn(c *net.UDPConn) *batchConn {
	return &batchConn{UDPConn: c, pc: ipv4.NewPacketConn(c), pending: &batch{}}
}

// hold makes writes queue until the matching release.
func (c *batchConn) hold() {
	c.mu.Lock()
	c.holders++
	c.mu.Unlock()
}

// release ends a writer's burst: what it queued is sent before release
// returns (with whatever others queued meanwhile).
func (c *batchConn) release() {
	c.mu.Lock()
	c.holders--
	empty := c.pending.n == 0
	c.mu.Unlock()
	if !empty {
		c.flush()
	}
}

// ReadFromAddrPort lets pion's mux read without allocating an address
// (ice.AddrPortReaderWriter). A datagram the direct path takes
// (direct_in.go) is not returned: the read goes on to the next.
func (c *batchConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		n, from, err := c.UDPConn.ReadFromUDPAddrPort(b)
		if err != nil || c.in == nil || !c.in.take(b[:n], from) {
			return n, from, err
		}
	}
}

// WriteTo is WriteToAddrPort for a *net.UDPAddr.
func (c *batchConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	a, ok := addr.(*net.UDPAddr)
	if !ok {
		return c.UDPConn.WriteTo(b, addr)
	}
	return c.WriteToAddrPort(b, a.AddrPort())
}

// WriteToAddrPort queues b for to while a writer holds the conn, else
// sends it. b is the caller's again when this returns: a queued datagram
// is a copy. An error in a batch's send is not reported to the writer
// (UDP would not have told it either): that datagram is lost, and counted.
func (c *batchConn) WriteToAddrPort(b []byte, to netip.AddrPort) (int, error) {
	ip := to.Addr().Unmap()
	if len(b) > maxDatagram || !ip.Is4() {
		return c.UDPConn.WriteToUDPAddrPort(b, to)
	}
	for {
		c.mu.Lock()
		if c.holders == 0 {
			c.mu.Unlock()
			return c.UDPConn.WriteToUDPAddrPort(b, to)
		}
		p := c.pending
		if p.n < batchMax {
			i := p.n
			p.n++
			p.ips[i] = ip.As4()
			p.addrs[i] = net.UDPAddr{IP: p.ips[i][:], Port: int(to.Port())}
			p.vecs[i][0] = p.bufs[i][:copy(p.bufs[i][:], b)]
			p.msgs[i] = ipv4.Message{Buffers: p.vecs[i][:], Addr: &p.addrs[i]}
			full := p.n == batchMax
			c.mu.Unlock()
			if full {
				c.flush()
			}
			return len(b), nil
		}
		c.mu.Unlock()
		c.flush() // full and not yet taken: send it, then queue
	}
}

// flush sends the pending batch.
func (c *batchConn) flush() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	p := c.pending
	if p.n == 0 {
		c.mu.Unlock()
		return
	}
	if k := len(c.free); k > 0 {
		c.pending = c.free[k-1]
		c.free = c.free[:k-1]
	} else {
		c.pending = &batch{}
	}
	c.mu.Unlock()

	ms := p.msgs[:p.n]
	for len(ms) > 0 {
		n, err := c.pc.WriteBatch(ms, 0)
		if err != nil || n <= 0 {
			n = max(n, 0) + 1 // skip the datagram the kernel refused
			c.failed.Add(1)
		}
		ms = ms[min(n, len(ms)):]
	}
	c.batches.Add(1)
	c.datagrams.Add(uint64(p.n))
	p.n = 0
	c.mu.Lock()
	c.free = append(c.free, p)
	c.mu.Unlock()
}
