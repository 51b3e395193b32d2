package udpmux

import (
	"net"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Dest is one destination of the socket's writer: a subscriber's address
// with its queue bound and counters.
type Dest struct {
	addr    netip.AddrPort
	udpAddr *net.UDPAddr // pre-built so sending allocates nothing
	// The address as the kernel takes it, pre-built for sendmmsg: sa4 for
	// an AF_INET socket (IPv4 destinations only), sa6 for an AF_INET6 one
	// (IPv4 destinations as v4-mapped).
	sa4   unix.RawSockaddrInet4
	sa6   unix.RawSockaddrInet6
	isV4  bool
	limit int32
	shard uint32 // which of the socket's writers sends to it

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
	d := &Dest{addr: addr, udpAddr: net.UDPAddrFromAddrPort(addr), limit: int32(queue), shard: shardOf(addr)}
	port := addr.Port()
	nport := port>>8 | port<<8 // network byte order in memory
	d.sa6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: nport, Addr: addr.Addr().As16(), Scope_id: scopeID(addr.Addr())}
	if addr.Addr().Is4() {
		d.isV4 = true
		d.sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: nport, Addr: addr.Addr().As4()}
	}
	return d
}

// shardOf spreads destinations over a socket's writers: a mix of every
// address byte and the port, since listeners may differ in either.
func shardOf(addr netip.AddrPort) uint32 {
	a := addr.Addr().As16()
	h := uint64(addr.Port())
	for i := 0; i < 16; i += 8 {
		h ^= uint64(a[i])<<56 | uint64(a[i+1])<<48 | uint64(a[i+2])<<40 | uint64(a[i+3])<<32 |
			uint64(a[i+4])<<24 | uint64(a[i+5])<<16 | uint64(a[i+6])<<8 | uint64(a[i+7])
		h *= 0x9e3779b97f4a7c15
		h ^= h >> 29
	}
	return uint32(h >> 32)
}

// scopeID is the numeric zone of a link-local IPv6 address (0 if none).
func scopeID(a netip.Addr) uint32 {
	if z := a.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			return uint32(ifi.Index)
		}
	}
	return 0
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
