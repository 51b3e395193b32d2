package rtctest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pion/transport/v5"
	"golang.org/x/sys/unix"
)

// arrivals remembers when each RTP packet reached the client's sockets:
// the kernel's receive timestamp (SO_TIMESTAMPNS), by SSRC and sequence
// number, which SRTP leaves in the clear. A packet's latency to its
// arrival is what the server (and the loopback) took; what the client's
// own process took after that (pion's receive path, on a machine the
// load shares) is not in it.
type arrivals struct {
	mu   sync.Mutex
	ssrc map[uint32]*arrivalRing
}

// arrivalRing holds one SSRC's newest arrivals, by sequence number.
type arrivalRing [1024]struct {
	seq uint16
	at  int64 // unix nanos; 0 for none
}

// maxArrivalSSRCs bounds the table: a client receives a few dozen.
const maxArrivalSSRCs = 4096

func newArrivals() *arrivals { return &arrivals{ssrc: map[uint32]*arrivalRing{}} }

// note records an RTP packet's arrival; RTCP, STUN and DTLS are let go.
func (a *arrivals) note(b []byte, at int64) {
	if len(b) < 12 || b[0]&0xc0 != 0x80 || (b[1] >= 192 && b[1] <= 223) {
		return
	}
	ssrc, seq := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint16(b[2:])
	a.mu.Lock()
	r := a.ssrc[ssrc]
	if r == nil && len(a.ssrc) < maxArrivalSSRCs {
		r = new(arrivalRing)
		a.ssrc[ssrc] = r
	}
	if r != nil {
		s := &r[seq%uint16(len(r))]
		s.seq, s.at = seq, at
	}
	a.mu.Unlock()
}

// at is when the packet ssrc/seq arrived (unix nanos), 0 if not known.
func (a *arrivals) at(ssrc uint32, seq uint16) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.ssrc[ssrc]
	if r == nil {
		return 0
	}
	if s := r[seq%uint16(len(r))]; s.seq == seq {
		return s.at
	}
	return 0
}

// stampedConn is a UDP socket whose reads note each packet's kernel
// receive time in arrivals.
type stampedConn struct {
	*net.UDPConn
	arr *arrivals
	mu  sync.Mutex
	oob []byte
}

func newStampedConn(c transport.UDPConn, arr *arrivals) transport.UDPConn {
	u, ok := c.(*net.UDPConn)
	if !ok {
		return c
	}
	raw, err := u.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c
	}
	return &stampedConn{UDPConn: u, arr: arr, oob: make([]byte, 64)}
}

// ReadFromAddrPort is what ICE reads with.
func (c *stampedConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, oobn, _, addr, err := c.UDPConn.ReadMsgUDPAddrPort(b, c.oob)
	if err == nil {
		at := time.Now().UnixNano()
		if msgs, perr := unix.ParseSocketControlMessage(c.oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
					sec := int64(binary.NativeEndian.Uint64(m.Data))
					nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
					at = sec*int64(time.Second) + nsec
				}
			}
		}
		c.arr.note(b[:n], at)
	}
	return n, addr, err
}

// ReadFrom reads as ReadFromAddrPort does.
func (c *stampedConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, ap, err := c.ReadFromAddrPort(b)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(ap), nil
}

// ReadFromUDP reads as ReadFromAddrPort does.
func (c *stampedConn) ReadFromUDP(b []byte) (int, *net.UDPAddr, error) {
	n, ap, err := c.ReadFromAddrPort(b)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(ap), nil
}

// WriteToAddrPort is what ICE writes with.
func (c *stampedConn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return c.UDPConn.WriteToUDPAddrPort(b, addr)
}
