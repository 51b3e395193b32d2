package loadgen

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDPListeners are many receiving UDP sockets read by a few goroutines with
// epoll and recvmmsg, so that thousands of listeners cost the load
// generator little more than the kernel's own work.
type UDPListeners struct {
	fds       []int
	addrs     []netip.AddrPort
	listeners []*Listener
	byFD      []*Listener // indexed by fd
	epfds     []int
	clock     *Clock
	stop      chan struct{}
	wg        sync.WaitGroup
}

// ListenUDP opens one socket per listener on ip (port chosen by the
// kernel), with rcvbuf bytes of receive buffer each.
func ListenUDP(ip netip.Addr, listeners []*Listener, rcvbuf int, clock *Clock) (*UDPListeners, error) {
	if err := RaiseFileLimit(len(listeners) + 256); err != nil {
		return nil, err
	}
	u := &UDPListeners{listeners: listeners, clock: clock, stop: make(chan struct{})}
	for range listeners {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: socket: %w", err)
		}
		u.fds = append(u.fds, fd)
		if rcvbuf > 0 {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		}
		sa := &unix.SockaddrInet4{Addr: ip.As4()}
		if err := unix.Bind(fd, sa); err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: bind: %w", err)
		}
		got, err := unix.Getsockname(fd)
		if err != nil {
			u.Close()
			return nil, err
		}
		u.addrs = append(u.addrs, netip.AddrPortFrom(ip, uint16(got.(*unix.SockaddrInet4).Port)))
	}
	return u, nil
}

// Addrs returns the listeners' addresses, in listener order.
func (u *UDPListeners) Addrs() []netip.AddrPort { return u.addrs }

// Start reads with n goroutines, each owning a share of the sockets.
func (u *UDPListeners) Start(n int) error {
	maxfd := 0
	for _, fd := range u.fds {
		maxfd = max(maxfd, fd)
	}
	u.byFD = make([]*Listener, maxfd+1)
	for i, fd := range u.fds {
		u.byFD[fd] = u.listeners[i]
	}
	for g := 0; g < n; g++ {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return err
		}
		u.epfds = append(u.epfds, ep)
		for i := g; i < len(u.fds); i += n {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(u.fds[i])}
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, u.fds[i], &ev); err != nil {
				return err
			}
		}
		u.wg.Add(1)
		go u.run(ep)
	}
	return nil
}

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

const batch = 64

func (u *UDPListeners) run(ep int) {
	defer u.wg.Done()
	events := make([]unix.EpollEvent, 256)
	bufs := make([][2048]byte, batch)
	iovs := make([]unix.Iovec, batch)
	msgs := make([]mmsghdr, batch)
	for i := range msgs {
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	for {
		select {
		case <-u.stop:
			return
		default:
		}
		n, err := unix.EpollWait(ep, events, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		for _, ev := range events[:max(n, 0)] {
			fd := int(ev.Fd)
			l := u.byFD[fd]
			for {
				r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch,
					unix.MSG_DONTWAIT, 0, 0)
				if e != 0 || r == 0 {
					break // EAGAIN: drained
				}
				now := u.clock.Now()
				for i := 0; i < int(r); i++ {
					size := int(msgs[i].n)
					if p, ok := Parse(bufs[i][:size]); ok {
						l.Observe(p, size, now)
					} else {
						l.Foreign++
					}
				}
				if int(r) < batch {
					break
				}
			}
		}
	}
}

// Close stops the readers and closes the sockets.
func (u *UDPListeners) Close() {
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
	u.wg.Wait()
	for _, ep := range u.epfds {
		unix.Close(ep)
	}
	for _, fd := range u.fds {
		unix.Close(fd)
	}
	u.epfds, u.fds = nil, nil
}

// RaiseFileLimit lifts RLIMIT_NOFILE to at least n (up to the hard limit).
func RaiseFileLimit(n int) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= uint64(n) {
		return nil
	}
	want := uint64(n)
	if want > rl.Max {
		rl.Max = want // root may raise the hard limit
	}
	rl.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("loadgen: need %d open files: %w", n, err)
	}
	return nil
}

// Clock is the monotonic clock shared by senders and receivers.
type Clock struct{ epoch time.Time }

// NewClock starts a clock.
func NewClock() *Clock { return &Clock{epoch: time.Now()} }

// Now returns nanoseconds since the clock started.
func (c *Clock) Now() int64 { return int64(time.Since(c.epoch)) }
