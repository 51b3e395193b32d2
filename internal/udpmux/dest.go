package udpmux

import (
	"net"
	"net/netip"
	"sync/atomic"
)

// Dest is one destination of the socket's writer: a subscriber's address
// with its queue bound and counters.
type Dest struct {
	addr    netip.AddrPort
	udpAddr *net.UDPAddr // pre-built so sending allocates nothing
	limit   int32
	shard   uint32 // which of the socket's writers sends to it

	inflight atomic.Int32
	sent     atomic.Uint64
	bytes    atomic.Uint64
	drops    atomic.Uint64
	errors   atomic.Uint64
}

// NewDest returns a destination for addr that holds at most queue packets in
// flight.
func NewDest(addr netip.AddrPort, queue int) *Dest {
	if queue < 1 {
		queue = 1
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	// Spread destinations over the writers by address; listeners on one
	// host differ in port, so the port decides.
	a := addr.Addr().As16()
	shard := uint32(addr.Port()) ^ uint32(a[15])<<3 ^ uint32(a[14])<<11
	return &Dest{addr: addr, udpAddr: net.UDPAddrFromAddrPort(addr), limit: int32(queue), shard: shard}
}

// Addr returns the destination's address.
func (d *Dest) Addr() netip.AddrPort { return d.addr }

// DestStats are a destination's counters.
type DestStats struct {
	Packets uint64 // sent
	Bytes   uint64 // sent
	Drops   uint64 // dropped because the queue was full or the socket closing
	Errors  uint64 // send errors
}

// Stats returns the destination's counters.
func (d *Dest) Stats() DestStats {
	return DestStats{d.sent.Load(), d.bytes.Load(), d.drops.Load(), d.errors.Load()}
}
