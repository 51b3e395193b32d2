package loadgen

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDPListeners are many listeners, each with an address of its own in
// 127.0.0.0/8, sharing a few UDP sockets bound to the unspecified address:
// a datagram to 127.77.1.9:P reaches the socket bound to port P, and the
// IP_PKTINFO control message says which listener it was for. To the
// system under test every listener is a distinct destination, as on a real
// network; to this machine a burst to thousands of listeners costs a few
// recvmmsg calls instead of one epoll wake-up and one system call per
// listener, and the open-file limit no longer caps the listener count.
// (A real client on another machine would cost this one nothing; the less
// the load generator takes, the more of the two cores the system under
// test gets.)
type UDPListeners struct {
	fds       []int
	ports     []int
	base      uint32 // the first listener's IPv4 address
	addrs     []netip.AddrPort
	listeners []*Listener
	clock     *Clock
	stop      chan struct{}
	wg        sync.WaitGroup
	stray     atomic.Uint64
}

// ListenUDP gives listener i the address base+i (which must stay inside
// 127.0.0.0/8) on one of sockets shared sockets, each with rcvbuf bytes of
// receive buffer (forced past net.core.rmem_max when the process may).
func ListenUDP(base netip.Addr, listeners []*Listener, sockets, rcvbuf int, clock *Clock) (*UDPListeners, error) {
	if !base.Is4() || base.As4()[0] != 127 {
		return nil, fmt.Errorf("loadgen: listener base %s is not in 127.0.0.0/8", base)
	}
	b4 := base.As4()
	first := uint32(b4[0])<<24 | uint32(b4[1])<<16 | uint32(b4[2])<<8 | uint32(b4[3])
	if last := uint64(first) + uint64(len(listeners)); last > 0x80000000 {
		return nil, fmt.Errorf("loadgen: %d listeners from %s run past 127.255.255.255", len(listeners), base)
	}
	sockets = max(1, min(sockets, len(listeners)))
	u := &UDPListeners{listeners: listeners, clock: clock, stop: make(chan struct{}), base: first}
	for range sockets {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: socket: %w", err)
		}
		u.fds = append(u.fds, fd)
		if rcvbuf > 0 && unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		}
		// The kernel stamps each datagram when it reaches the socket, so
		// latency is measured to the listener's socket, not to whenever
		// this process gets round to reading it.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: SO_TIMESTAMPNS: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: IP_PKTINFO: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: bind: %w", err)
		}
		got, err := unix.Getsockname(fd)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("loadgen: getsockname: %w", err)
		}
		u.ports = append(u.ports, got.(*unix.SockaddrInet4).Port)
	}
	for i := range listeners {
		a := first + uint32(i)
		ip := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		u.addrs = append(u.addrs, netip.AddrPortFrom(ip, uint16(u.ports[i%len(u.fds)])))
	}
	return u, nil
}

// Addrs returns the listeners' addresses, in listener order.
func (u *UDPListeners) Addrs() []netip.AddrPort { return u.addrs }

// Stray returns the number of datagrams that reached the sockets addressed
// to no listener of theirs (or without IP_PKTINFO).
func (u *UDPListeners) Stray() uint64 { return u.stray.Load() }

// Start starts one reader goroutine per socket.
func (u *UDPListeners) Start() {
	for i, fd := range u.fds {
		u.wg.Add(1)
		go u.run(i, fd)
	}
}

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

const (
	batch   = 64
	oobSize = 128 // room for SCM_TIMESTAMPNS and IP_PKTINFO
)

func (u *UDPListeners) run(sock, fd int) {
	defer u.wg.Done()
	bufs := make([][2048]byte, batch)
	oob := make([][oobSize]byte, batch)
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
		for i := range msgs {
			msgs[i].hdr.SetControllen(oobSize)
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch,
			unix.MSG_DONTWAIT, 0, 0)
		if e != 0 || r == 0 {
			// Drained: sleep rather than block, since a reader blocked in
			// the kernel makes the sender pay for waking it, which real
			// clients on other machines would not cost it.
			time.Sleep(pollInterval)
			continue
		}
		now := u.clock.Now()
		for i := 0; i < int(r); i++ {
			size := int(msgs[i].n)
			st := ParseControl(oob[i][:msgs[i].hdr.Controllen])
			l := u.listener(sock, st)
			if l == nil {
				u.stray.Add(1)
				continue
			}
			at := now
			if st.Stamped {
				at = st.Stamp - u.clock.epoch
			} else {
				l.Unstamped++
			}
			if p, ok := Parse(bufs[i][:size]); ok {
				l.Observe(p, size, at)
			} else {
				l.Foreign++
			}
		}
	}
}

// listener returns the listener a datagram on socket sock was addressed to,
// or nil when it was for no listener of that socket.
func (u *UDPListeners) listener(sock int, c Control) *Listener {
	if !c.HasDst {
		return nil
	}
	i := c.Dst - u.base
	if c.Dst < u.base || int(i) >= len(u.listeners) || int(i)%len(u.fds) != sock {
		return nil
	}
	return u.listeners[i]
}

// pollInterval is how long an idle reader sleeps between polls.
const pollInterval = 500 * time.Microsecond

// Control is what the control messages of one datagram say.
type Control struct {
	Stamp   int64 // SCM_TIMESTAMPNS (CLOCK_REALTIME) as Unix nanoseconds
	Stamped bool
	Dst     uint32 // IP_PKTINFO's ipi_addr: the header's destination
	HasDst  bool
}

// ParseControl walks the control messages of one datagram.
func ParseControl(oob []byte) Control {
	var c Control
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return c
		}
		data := oob[unix.CmsgLen(0):h.Len]
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= 16:
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			c.Stamp, c.Stamped = ts.Nano(), true
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			a := pi.Addr
			c.Dst, c.HasDst = uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]), true
		}
		oob = oob[min(len(oob), unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0))):]
	}
	return c
}

// Close stops the readers and closes the sockets.
func (u *UDPListeners) Close() {
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
	u.wg.Wait()
	for _, fd := range u.fds {
		unix.Close(fd)
	}
	u.fds = nil
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
