package udpmux

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sending sockets of their own for the writers.
//
// Go's net package registers every socket with its poller, for reading and
// for writing, and serialises writes on one descriptor with a lock. A
// writer sending tens of thousands of datagrams a second on the shared
// socket pays for both: each datagram the loopback device frees wakes the
// socket's wait queue for the poller (sock_wfree → the epoll callback),
// which profiles showed at 5 % of the node's CPU in a large fan-out, and
// writers on different cores take turns on the lock, parking and waking
// each other through futexes.
//
// When the shared socket was opened with SO_REUSEPORT (ListenUDP), each
// writer gets a non-blocking socket of its own bound to the same address, so
// what it sends leaves from the same address and port (clients that latch
// on the source still see one peer). Those sockets are never in the
// poller and never receive: a reuseport program attached before they are
// bound steers every arriving datagram to the group's first socket, the
// shared one.
//
// The writers send on them with raw system calls, without telling the Go
// scheduler: a send that cannot block takes a few microseconds, and
// announcing each one as a blocking call kept the runtime's monitor
// thread waking to look at them. When a socket's buffer is full (EAGAIN),
// the writer waits for room in poll(2), as an ordinary blocking call.

// ListenUDP opens a UDP socket on addr ("host:port", port 0 for any) with
// SO_REUSEPORT, for New to give its writers sending sockets of their own.
// A port given by number is bound once without SO_REUSEPORT first, so that
// it fails as usual when the port is taken, rather than joining another
// process's reuseport group.
func ListenUDP(addr string) (*net.UDPConn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("udpmux: %w", err)
	}
	if ua.Port != 0 {
		c, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, fmt.Errorf("udpmux: %w", err)
		}
		c.Close()
	}
	lc := net.ListenConfig{Control: reusePort}
	c, err := lc.ListenPacket(context.Background(), "udp", ua.String())
	if err != nil {
		return nil, fmt.Errorf("udpmux: %w", err)
	}
	return c.(*net.UDPConn), nil
}

// reusePort is a net.ListenConfig Control function that sets SO_REUSEPORT.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// steerToFirst is a classic BPF reuseport program: "return 0", the index
// of the group's first socket.
var steerToFirst = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// openSenders opens n sending sockets in conn's SO_REUSEPORT group, each
// with sndbuf bytes of send buffer (0: the default) and DF set. It returns
// nil when conn is not in such a group or the kernel refuses a step; the
// writers then send on conn itself.
func openSenders(conn *net.UDPConn, n, sndbuf int) []int {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil
	}
	var (
		ok     bool
		domain int
		v6only int
		sa     unix.Sockaddr
	)
	_ = rc.Control(func(fd uintptr) {
		s := int(fd)
		if v, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v == 0 {
			return
		}
		if domain, err = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil {
			return
		}
		if domain == unix.AF_INET6 {
			if v6only, err = unix.GetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); err != nil {
				return
			}
		}
		if sa, err = unix.Getsockname(s); err != nil {
			return
		}
		// Before any other socket joins the group: from here on every
		// datagram to the address goes to conn.
		prog := unix.SockFprog{Len: uint16(len(steerToFirst)), Filter: &steerToFirst[0]}
		ok = unix.SetsockoptSockFprog(s, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog) == nil
	})
	if !ok {
		return nil
	}
	var fds []int
	for range n {
		fd, err := openSender(domain, v6only, sa, sndbuf)
		if err != nil {
			closeAll(fds)
			return nil
		}
		fds = append(fds, fd)
	}
	return fds
}

func openSender(domain, v6only int, sa unix.Sockaddr, sndbuf int) (int, error) {
	fd, err := unix.Socket(domain, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	set := func(level, opt, v int) {
		if err == nil {
			err = unix.SetsockoptInt(fd, level, opt, v)
		}
	}
	set(unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	if domain == unix.AF_INET6 {
		set(unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only)
		set(unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
	}
	if domain == unix.AF_INET || v6only == 0 {
		set(unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	}
	if sndbuf > 0 {
		set(unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
	}
	if err == nil {
		err = unix.Bind(fd, sa)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// sendto sends b to d on the writer's socket fd (v6: AF_INET6) and returns
// the error number, 0 on success.
func sendto(fd int, v6 bool, b []byte, d *Dest) syscall.Errno {
	var sa unsafe.Pointer
	var salen uintptr
	if v6 || !d.isV4 {
		sa, salen = unsafe.Pointer(&d.sa6), unix.SizeofSockaddrInet6
	} else {
		sa, salen = unsafe.Pointer(&d.sa4), unix.SizeofSockaddrInet4
	}
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), 0, uintptr(sa), salen)
		switch e {
		case unix.EINTR:
		case unix.EAGAIN:
			if !waitWritable(fd) {
				return e
			}
		default:
			return e
		}
	}
}

// writableWait bounds one wait for room in a sending socket's buffer; a
// datagram that still finds none is counted as a send error.
const writableWait = time.Second

// waitWritable waits in poll(2) until fd has room to send, and reports
// whether it has.
func waitWritable(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	for {
		n, err := unix.Poll(pfd, int(writableWait/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&unix.POLLOUT != 0
	}
}
