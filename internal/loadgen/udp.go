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
		// The kernel stamps each datagram when it reaches the socket, so
		// latency is measured to the listener's socket, not to whenever
		// this process gets round to reading it.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: SO_TIMESTAMPNS: %w", err)
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
	events := make([]unix.EpollEvent, 1024)
	bufs := make([][2048]byte, batch)
	oob := make([][64]byte, batch)
	iovs := make([]unix.Iovec, batch)
	msgs := make([]mmsghdr, batch)
	for i := range msgs {
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
		msgs[i].hdr.Control = &oob[i][0]
	}
	for {
		select {
		case <-u.stop:
			return
		default:
		}
		// Poll, then sleep briefly when nothing is ready: a listener that
		// blocks in epoll_wait makes every sender pay for waking it, which
		// real clients on other machines would not cost this one.
		n, err := unix.EpollWait(ep, events, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n <= 0 {
			time.Sleep(pollInterval)
			continue
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			l := u.byFD[fd]
			for {
				for i := range msgs {
					msgs[i].hdr.SetControllen(len(oob[i]))
				}
				r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch,
					unix.MSG_DONTWAIT, 0, 0)
				if e != 0 || r == 0 {
					break // EAGAIN: drained
				}
				now := u.clock.Now()
				for i := 0; i < int(r); i++ {
					size := int(msgs[i].n)
					at := now
					if ts, ok := kernelStamp(oob[i][:msgs[i].hdr.Controllen]); ok {
						at = ts - u.clock.epoch
					} else {
						l.Unstamped++
					}
					if p, ok := Parse(bufs[i][:size]); ok {
						l.Observe(p, size, at)
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

// pollInterval is how long an idle reader sleeps between polls.
const pollInterval = 500 * time.Microsecond

// kernelStamp finds the SCM_TIMESTAMPNS control message (struct timespec,
// CLOCK_REALTIME) and returns it as Unix nanoseconds.
func kernelStamp(oob []byte) (int64, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && int(h.Len) >= unix.CmsgLen(16) {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
			return ts.Nano(), true
		}
		oob = oob[unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)):]
	}
	return 0, false
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

// RaiseFileLimit lifts RLIMIT_NOFILE to at least n. When the hard limit is
// lower and cannot be raised, it lifts the soft limit to the hard one and
// says how many files are allowed.
func RaiseFileLimit(n int) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= uint64(n) {
		return nil
	}
	want := rl
	want.Cur = uint64(n)
	want.Max = max(rl.Max, uint64(n))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
		return nil
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Max < uint64(n) {
		return fmt.Errorf("loadgen: need %d open files, the limit here is %d", n, rl.Max)
	}
	return nil
}

// FileLimit returns the soft RLIMIT_NOFILE after raising it as far as allowed.
func FileLimit() int {
	_ = RaiseFileLimit(1 << 20)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int(rl.Cur)
}

// Clock is the clock shared by senders and receivers: wall-clock
// nanoseconds since it started, the same clock the kernel stamps received
// datagrams with.
type Clock struct{ epoch int64 }

// NewClock starts a clock.
func NewClock() *Clock { return &Clock{epoch: time.Now().UnixNano()} }

// Now returns nanoseconds since the clock started.
func (c *Clock) Now() int64 { return time.Now().UnixNano() - c.epoch }
