package mixbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/bench/loadgen"
)

// Load is the members' sockets: a few UDP sockets bound to the unspecified
// address; member i owns the address base+i on socket i mod len(fds), so
// to a server every member is a distinct endpoint while this process reads
// and writes thousands of them with a few recvmmsg and sendmmsg calls.
// The sockets (and so the addresses) live for a whole series.
type Load struct {
	fds   []int
	ports []int
	base  uint32
	clock *loadgen.Clock
	// tap, when set (by tests, before Run), sees every member's RTP
	// payloads from its socket's reader.
	tap func(member int, payload []byte)
}

// NewLoad opens sockets sockets for members from base (in 127.0.0.0/8).
func NewLoad(base netip.Addr, sockets int) (*Load, error) {
	if !base.Is4() || base.As4()[0] != 127 {
		return nil, fmt.Errorf("mixbench: member base %s is not in 127.0.0.0/8", base)
	}
	b := base.As4()
	l := &Load{base: binary.BigEndian.Uint32(b[:]), clock: loadgen.NewClock()}
	for range max(1, sockets) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.fds = append(l.fds, fd)
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<20)
		}
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			l.Close()
			return nil, err
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil {
			l.Close()
			return nil, err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
			l.Close()
			return nil, err
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.ports = append(l.ports, sa.(*unix.SockaddrInet4).Port)
	}
	return l, nil
}

// Addr is member i's address.
func (l *Load) Addr(i int) netip.AddrPort {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], l.base+uint32(i))
	return netip.AddrPortFrom(netip.AddrFrom4(b), uint16(l.ports[i%len(l.fds)]))
}

// Close closes the sockets.
func (l *Load) Close() {
	for _, fd := range l.fds {
		unix.Close(fd)
	}
	l.fds = nil
}

// mmsghdr is struct mmsghdr of sendmmsg(2) and recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

const batch = 64

// phases spreads the speakers over the 20 ms frame, as independent
// endpoints' clocks would be, rather than in one burst.
const phases = 10

// Counts are what the load sent.
type Counts struct {
	Sent   uint64 `json:"sent"`
	Failed uint64 `json:"send_failed,omitempty"`
	Stray  uint64 `json:"stray,omitempty"` // datagrams for no member of the step
}

// Run plays the members for warmup+window: the speakers send their
// recordings, the silent members one frame of silence at the start (so a
// server that waits to hear from an endpoint before sending to it, as
// AudioBridge's plain RTP participants do, sends); every member's reader
// measures its mix. It returns the receivers, in member order, measured
// over the window.
func (l *Load) Run(ctx context.Context, ms []*Member, rate int, warmup, window time.Duration) ([]receiver, Counts) {
	l.drain()
	rs := make([]receiver, len(ms))
	start := l.clock.Now()
	w0, w1 := start+int64(warmup), start+int64(warmup+window)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stray := make([]uint64, len(l.fds)) // one per reader
	for s, fd := range l.fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stray[s] = l.read(s, fd, rs, rate, w0, w1, stop)
		}()
	}
	c := l.send(ctx, ms, rate, time.Duration(w1-start)+Frame)
	close(stop)
	wg.Wait()
	for _, n := range stray {
		c.Stray += n
	}
	return rs, c
}

// drain discards what reached the sockets since the last run (a server
// may go on sending its mix between steps).
func (l *Load) drain() {
	buf := make([]byte, 2048)
	for _, fd := range l.fds {
		for {
			if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
				break
			}
		}
	}
}

// send runs the speakers for d, from one goroutine.
func (l *Load) send(ctx context.Context, ms []*Member, rate int, d time.Duration) Counts {
	var c Counts
	bySock := make([][][]*Member, phases) // phase → socket → speakers
	for p := range bySock {
		bySock[p] = make([][]*Member, len(l.fds))
	}
	silent := make([][]*Member, len(l.fds))
	for i, m := range ms {
		s := i % len(l.fds)
		if m.Speaks {
			p := (i / len(l.fds)) % phases
			bySock[p][s] = append(bySock[p][s], m)
		} else {
			silent[s] = append(silent[s], m)
		}
	}
	msgs := make([]mmsghdr, batch)
	iovs := make([]unix.Iovec, batch)
	pkts := make([][]byte, 0, len(ms))
	flush := func(s int, group []*Member, quiet bool) {
		pkts = pkts[:0]
		for _, m := range group {
			pkts = append(pkts, m.next(rate, quiet))
		}
		n, f := sendBatch(l.fds[s], group, pkts, msgs, iovs)
		c.Sent += uint64(n)
		c.Failed += uint64(f)
	}
	for s, group := range silent {
		flush(s, group, true)
	}
	t0 := time.Now()
	step := Frame / phases
	for k := 0; ; k++ {
		due := t0.Add(time.Duration(k) * step)
		if due.Sub(t0) >= d || ctx.Err() != nil {
			return c
		}
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		for s, group := range bySock[k%phases] {
			flush(s, group, false)
		}
	}
}

// read drains socket s until stop, feeding each member's receiver.
func (l *Load) read(s, fd int, rs []receiver, rate int, w0, w1 int64, stop chan struct{}) (stray uint64) {
	bufs := make([][2048]byte, batch)
	oob := make([][128]byte, batch)
	iovs := make([]unix.Iovec, batch)
	msgs := make([]mmsghdr, batch)
	for i := range msgs {
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
		msgs[i].hdr.Control = &oob[i][0]
	}
	epoch := time.Now().UnixNano() - l.clock.Now()
	for {
		select {
		case <-stop:
			return stray
		default:
		}
		for i := range msgs {
			msgs[i].hdr.SetControllen(len(oob[i]))
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch, unix.MSG_DONTWAIT, 0, 0)
		if e != 0 || r == 0 {
			// Drained: sleep rather than block (see loadgen.UDPListeners);
			// the kernel's timestamps say when each datagram arrived.
			time.Sleep(500 * time.Microsecond)
			continue
		}
		now := l.clock.Now()
		for i := range int(r) {
			b := bufs[i][:msgs[i].n]
			c := loadgen.ParseControl(oob[i][:msgs[i].hdr.Controllen])
			at := now
			if c.Stamped {
				at = c.Stamp - epoch
			}
			k := int(c.Dst - l.base)
			if !c.HasDst || c.Dst < l.base || k >= len(rs) || k%len(l.fds) != s || len(b) < 12 || b[0]>>6 != 2 {
				stray++
				continue
			}
			if pt := b[1] & 0x7f; pt >= 72 && pt <= 76 { // RTCP 200–204 (RFC 5761 §4)
				rs[k].rtcp++
				continue
			}
			rs[k].observe(binary.BigEndian.Uint32(b[4:]), rate, at, at >= w0 && at < w1)
			if l.tap != nil {
				l.tap(k, b[12:])
			}
		}
	}
}
