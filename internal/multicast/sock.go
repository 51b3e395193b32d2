package multicast

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenGroup opens a UDP socket bound to the group address and port
// themselves, with SO_REUSEADDR and SO_REUSEPORT so that it shares them with
// other listeners on the host (vic, rat, another bridge): every socket bound
// to a multicast address and port gets a copy of each datagram sent there.
//
// net.ListenPacket and net.ListenConfig cannot do this: given a multicast
// address they bind the wildcard address instead (net/sock_posix.go,
// listenDatagram), and such a socket would also take unicast datagrams sent
// to the port on any local address. So the socket is made here and handed to
// the net package with net.FilePacketConn.
func listenGroup(group netip.AddrPort) (*net.UDPConn, error) {
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "udp4:"+group.String())
	defer f.Close() // FilePacketConn works on a duplicate
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return nil, fmt.Errorf("SO_REUSEPORT: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: group.Addr().As4(), Port: int(group.Port())}); err != nil {
		return nil, fmt.Errorf("bind %s: %w", group, err)
	}
	c, err := net.FilePacketConn(f)
	if err != nil {
		return nil, err
	}
	conn, ok := c.(*net.UDPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("bind %s: not a UDP socket", group)
	}
	return conn, nil
}
