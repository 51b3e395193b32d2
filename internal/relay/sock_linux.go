package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock is one relay UDP socket, a non-blocking descriptor read, written and
// closed only by its worker.
type sock struct {
	fd   int
	port int
	side *side
	rtcp bool
	// kstate is kNone, kInstalled or kNever (kernel.go).
	kstate atomic.Uint32
}

// rawAddr is a socket address in the kernel's form, ready for sendmmsg.
type rawAddr struct {
	b [unix.SizeofSockaddrInet6]byte
	n uint32
}

func toRaw(ap netip.AddrPort) rawAddr {
	var a rawAddr
	if ap.Addr().Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&a.b[0]))
		sa.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
		sa.Addr = ap.Addr().As4()
		a.n = unix.SizeofSockaddrInet4
		return a
	}
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&a.b[0]))
	sa.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	sa.Addr = ap.Addr().As16()
	a.n = unix.SizeofSockaddrInet6
	return a
}

// sameAddr reports whether the kernel address in b (n bytes, as recvmmsg
// fills it) is a: family, port and IP, ignoring padding and flow info.
func (a *rawAddr) sameAddr(b *[unix.SizeofSockaddrInet6]byte, n uint32) bool {
	if n != a.n {
		return false
	}
	if a.b[0] != b[0] || a.b[1] != b[1] || a.b[2] != b[2] || a.b[3] != b[3] { // family, port
		return false
	}
	if n == unix.SizeofSockaddrInet4 {
		return *(*[4]byte)(a.b[4:8]) == *(*[4]byte)(b[4:8])
	}
	return *(*[16]byte)(a.b[8:24]) == *(*[16]byte)(b[8:24])
}

// fromRaw converts a kernel address back; the zero AddrPort if malformed.
func fromRaw(b *[unix.SizeofSockaddrInet6]byte, n uint32) netip.AddrPort {
	port := binary.BigEndian.Uint16(b[2:4])
	switch {
	case n == unix.SizeofSockaddrInet4 && *(*uint16)(unsafe.Pointer(&b[0])) == unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4(*(*[4]byte)(b[4:8])), port)
	case n == unix.SizeofSockaddrInet6 && *(*uint16)(unsafe.Pointer(&b[0])) == unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(*(*[16]byte)(b[8:24])).Unmap(), port)
	}
	return netip.AddrPort{}
}

var errPortBusy = errors.New("port in use")

// openUDP binds a non-blocking UDP socket on addr:port.
func openUDP(addr netip.Addr, port int) (int, error) {
	family := unix.AF_INET
	if !addr.Is4() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("relay: socket: %w", err)
	}
	var sa unix.Sockaddr
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Port: port, Addr: addr.As4()}
	} else {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		sa = &unix.SockaddrInet6{Port: port, Addr: addr.As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) || errors.Is(err, unix.EACCES) {
			return -1, errPortBusy
		}
		return -1, fmt.Errorf("relay: bind %s: %w", netip.AddrPortFrom(addr, uint16(port)), err)
	}
	return fd, nil
}
