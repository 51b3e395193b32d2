package relaybench

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pion/sdp/v3"
	"golang.org/x/sys/unix"
)

// Endpoints live on their own loopback addresses so that their ports never
// collide with the relays' port ranges on 127.0.0.1.
var (
	callerIP = netip.MustParseAddr("127.0.0.2")
	calleeIP = netip.MustParseAddr("127.0.0.3")
)

// endpoint is one party of a call: a non-blocking UDP socket that sends to
// its relay port and receives the other party's packets from it.
type endpoint struct {
	fd    int
	local netip.AddrPort
	dest  unix.RawSockaddrInet4 // the relay port it sends to
	ssrc  uint32                // its packets' SSRC
	peer  uint32                // the SSRC it should receive
	seq   uint32                // packets made: the RTP sequence number is its low 16 bits, the timestamp seq*160

	sent, sentCounted uint64 // by the sending thread
	recv, misrouted   uint64 // by the receiving thread
}

func openEndpoint(ip netip.Addr, ssrc uint32) (*endpoint, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: ip.As4()}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	port := sa.(*unix.SockaddrInet4).Port
	return &endpoint{fd: fd, local: netip.AddrPortFrom(ip, uint16(port)), ssrc: ssrc}, nil
}

func (e *endpoint) setDest(ap netip.AddrPort) {
	e.dest = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&e.dest.Port))[:], ap.Port())
}

// offer is the SDP a phone at ap would send.
func offerSDP(ap netip.AddrPort) []byte {
	return fmt.Appendf(nil, "v=0\r\no=- 1 1 IN IP4 %s\r\ns=-\r\nc=IN IP4 %s\r\nt=0 0\r\n"+
		"m=audio %d RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=sendrecv\r\n", ap.Addr(), ap.Addr(), ap.Port())
}

// mediaAddr returns the first m= line's address from a relay's SDP.
func mediaAddr(body []byte) (netip.AddrPort, error) {
	var s sdp.SessionDescription
	if err := s.Unmarshal(body); err != nil {
		return netip.AddrPort{}, fmt.Errorf("relay's SDP: %w", err)
	}
	if len(s.MediaDescriptions) == 0 {
		return netip.AddrPort{}, fmt.Errorf("relay's SDP has no m= line")
	}
	m := s.MediaDescriptions[0]
	c := s.ConnectionInformation
	if m.ConnectionInformation != nil {
		c = m.ConnectionInformation
	}
	if c == nil || c.Address == nil {
		return netip.AddrPort{}, fmt.Errorf("relay's SDP has no c= line")
	}
	a, err := netip.ParseAddr(c.Address.Address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a, uint16(m.MediaName.Port.Value)), nil
}

// calls is a set of calls set up on a relay: endpoints 2i and 2i+1 talk.
type calls struct {
	r   *Relay
	ids []string
	eps []*endpoint
}

// setupCalls sets up n calls on r with offer and answer over ng.
func setupCalls(r *Relay, n int, tag string) (*calls, error) {
	cs := &calls{r: r}
	for i := 0; i < n; i++ {
		a, err := openEndpoint(callerIP, uint32(2*i+1))
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("generator socket: %w", err)
		}
		cs.eps = append(cs.eps, a)
		b, err := openEndpoint(calleeIP, uint32(2*i+2))
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("generator socket: %w", err)
		}
		cs.eps = append(cs.eps, b)
		a.peer, b.peer = b.ssrc, a.ssrc
		id := fmt.Sprintf("%s-%d", tag, i)
		offer, err := r.NG.Offer(id, "from-"+id, offerSDP(a.local), nil)
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("call %d of %d: %w", i+1, n, err)
		}
		cs.ids = append(cs.ids, id)
		answer, err := r.NG.Answer(id, "from-"+id, "to-"+id, offerSDP(b.local), nil)
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("call %d of %d: %w", i+1, n, err)
		}
		toB, err1 := mediaAddr(offer)
		toA, err2 := mediaAddr(answer)
		if err1 != nil || err2 != nil {
			cs.close()
			return nil, fmt.Errorf("call %d: %v %v", i+1, err1, err2)
		}
		a.setDest(toA)
		b.setDest(toB)
	}
	return cs, nil
}

// close deletes the calls and closes the endpoints.
func (cs *calls) close() {
	for _, id := range cs.ids {
		_ = cs.r.NG.Delete(id)
	}
	for _, e := range cs.eps {
		unix.Close(e.fd)
	}
	cs.ids, cs.eps = nil, nil
}

// packet fills buf with an RTP packet of e (PT 0) and advances its
// sequence number.
func (e *endpoint) packet(buf []byte) {
	buf[0], buf[1] = 0x80, 0
	binary.BigEndian.PutUint16(buf[2:], uint16(e.seq))
	binary.BigEndian.PutUint32(buf[4:], e.seq*160)
	binary.BigEndian.PutUint32(buf[8:], e.ssrc)
	e.seq++
}

func sendto(e *endpoint, buf []byte) bool {
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(e.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		0, uintptr(unsafe.Pointer(&e.dest)), unix.SizeofSockaddrInet4)
	return errno == 0
}

// receiver counts what the endpoints receive until stop is set: epoll over
// all of them, recvmmsg on each ready one. counted are packets whose
// packet number is at least from (after the warm-up).
type receiver struct {
	eps     []*endpoint
	from    uint32
	stop    atomic.Bool
	total   atomic.Uint64 // all packets received, for rates
	counted uint64
	done    chan error
}

func startReceiver(eps []*endpoint, from uint32) *receiver {
	rc := &receiver{eps: eps, from: from, done: make(chan error, 1)}
	go func() { rc.done <- rc.run() }()
	return rc
}

func (rc *receiver) run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(ep)
	for i, e := range rc.eps {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(e.fd), Pad: int32(i)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, e.fd, &ev); err != nil {
			return err
		}
	}
	const batch = 16
	bufs := make([]byte, batch*2048)
	iov := make([]unix.Iovec, batch)
	msgs := make([]unix.Mmsghdr, batch)
	for i := range msgs {
		iov[i].Base = &bufs[i*2048]
		iov[i].SetLen(2048)
		msgs[i].Hdr.Iov = &iov[i]
		msgs[i].Hdr.Iovlen = 1
	}
	events := make([]unix.EpollEvent, 512)
	for !rc.stop.Load() {
		n, err := unix.EpollWait(ep, events, 20)
		if err != nil && err != unix.EINTR {
			return err
		}
		for i := 0; i < n; i++ {
			e := rc.eps[events[i].Pad]
			r1, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&msgs[0])), batch,
				unix.MSG_DONTWAIT, 0, 0)
			if errno != 0 {
				continue
			}
			got := int(r1)
			for j := 0; j < got; j++ {
				b := bufs[j*2048 : j*2048+int(msgs[j].Len)]
				if len(b) < 12 || binary.BigEndian.Uint32(b[8:]) != e.peer {
					e.misrouted++
					continue
				}
				e.recv++
				// The timestamp, not the 16-bit sequence number, which wraps
				// within a step above 36,000 packets/s per endpoint.
				if binary.BigEndian.Uint32(b[4:])/160 >= rc.from {
					rc.counted++
				}
			}
			rc.total.Add(uint64(got))
		}
	}
	return nil
}

// finish stops the receiver and returns its error.
func (rc *receiver) finish() error {
	rc.stop.Store(true)
	return <-rc.done
}

// senders is the number of sending threads. With the relay in the kernel a
// datagram is forwarded and delivered inside its sender's system call, so a
// single sending thread would measure itself, not the machine: two threads,
// each with half the endpoints and a raw socket of its own, can use both
// CPUs, as the relay processes do. Every system gets the same generator.
const senders = 2

// paceAll runs pace over the endpoints split among the sending threads and
// returns the worst lag and the longest window.
func paceAll(eps []*endpoint, size int, perEP float64, warm, dur time.Duration, countFrom uint32) (lag, window time.Duration) {
	type out struct{ lag, window time.Duration }
	ch := make(chan out, senders)
	per := (len(eps) + senders - 1) / senders
	started := 0
	for i := 0; i < len(eps); i += per {
		part := eps[i:min(i+per, len(eps))]
		started++
		go func() {
			l, w := pace(part, size, perEP, warm, dur, countFrom)
			ch <- out{l, w}
		}()
	}
	for range started {
		o := <-ch
		lag, window = max(lag, o.lag), max(window, o.window)
	}
	return lag, window
}

// pace sends size-byte packets from every endpoint at perEP packets per
// second each for dur, endpoint i's stream shifted by i/len(eps) of a packet
// interval so that the load is even, checking every millisecond what is
// due. It returns how far behind schedule it fell at worst, and how long
// the measuring window (from warm on) really took: a generator that falls
// behind sends every packet all the same, only later, so rates must be
// taken over that time, not over the schedule's. Packets with a number of at
// least countFrom (the measuring window) are counted in sentCounted.
//
// The packets leave through one raw IPv4 socket in sendmmsg batches, each
// with its endpoint's source address and port, so that the generator's
// sending costs far less than the relay's work per packet; replies still
// arrive at the endpoints' own sockets. Without the privilege for a raw
// socket it falls back to one sendto per packet from each endpoint.
func pace(eps []*endpoint, size int, perEP float64, warm, dur time.Duration, countFrom uint32) (lag, window time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	size = max(size, 12)
	raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		raw = -1
	} else {
		defer unix.Close(raw)
		_ = unix.SetsockoptInt(raw, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	b := &rawBatch{fd: raw, size: size, countFrom: countFrom}
	b.init()
	made := make([]uint64, len(eps))
	n := float64(len(eps))
	start := time.Now()
	var worst time.Duration
	var measuring time.Time
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * time.Millisecond)
		if due.Sub(start) >= dur {
			return worst, time.Since(measuring)
		}
		if measuring.IsZero() && due.Sub(start) >= warm {
			measuring = time.Now()
		}
		if d := time.Until(due); d > 0 {
			// The kernel's sleep, not the Go timer: this thread is locked,
			// and a timer waits for a P that the receiver may be holding.
			ts := unix.NsecToTimespec(int64(d))
			_ = unix.Nanosleep(&ts, nil)
		} else if -d > worst {
			worst = -d
		}
		t := float64(k+1) / 1000
		for i, e := range eps {
			want := t*perEP - float64(i)/n
			for float64(made[i]) < want {
				made[i]++
				b.add(e)
			}
		}
		b.flush()
	}
}

// rawBatch collects datagrams for one sendmmsg on a raw socket.
type rawBatch struct {
	fd, size  int
	countFrom uint32
	bufs      []byte
	iov       []unix.Iovec
	msgs      []unix.Mmsghdr
	eps       []*endpoint
	seqs      []uint32
	one       []byte
}

const rawBatchLen = 64
const ipUDPLen = 28 // IPv4 + UDP headers

func (b *rawBatch) init() {
	b.bufs = make([]byte, rawBatchLen*(ipUDPLen+b.size))
	b.iov = make([]unix.Iovec, rawBatchLen)
	b.msgs = make([]unix.Mmsghdr, rawBatchLen)
	b.one = make([]byte, b.size)
	for i := range b.msgs {
		b.iov[i].Base = &b.bufs[i*(ipUDPLen+b.size)]
		b.iov[i].SetLen(ipUDPLen + b.size)
		b.msgs[i].Hdr.Iov = &b.iov[i]
		b.msgs[i].Hdr.Iovlen = 1
		b.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
}

func (b *rawBatch) add(e *endpoint) {
	if b.fd < 0 {
		seq := e.seq
		e.packet(b.one)
		if sendto(e, b.one) {
			e.count(seq, b.countFrom)
		}
		return
	}
	n := len(b.eps)
	buf := b.bufs[n*(ipUDPLen+b.size) : (n+1)*(ipUDPLen+b.size)]
	ipUDPHeader(buf, e, b.size)
	b.seqs = append(b.seqs, e.seq)
	e.packet(buf[ipUDPLen:])
	b.msgs[n].Hdr.Name = (*byte)(unsafe.Pointer(&e.dest))
	b.eps = append(b.eps, e)
	if len(b.eps) == rawBatchLen {
		b.flush()
	}
}

// flush sends the batch; a datagram the kernel refuses is not counted.
func (b *rawBatch) flush() {
	n := len(b.eps)
	for off := 0; off < n; {
		r1, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(b.fd), uintptr(unsafe.Pointer(&b.msgs[off])),
			uintptr(n-off), 0, 0, 0)
		if errno != 0 || r1 == 0 {
			off++
			continue
		}
		for j := off; j < off+int(r1); j++ {
			b.eps[j].count(b.seqs[j], b.countFrom)
		}
		off += int(r1)
	}
	b.eps, b.seqs = b.eps[:0], b.seqs[:0]
}

// count records a datagram sent with sequence number seq.
func (e *endpoint) count(seq, countFrom uint32) {
	atomic.AddUint64(&e.sent, 1)
	if seq >= countFrom {
		e.sentCounted++
	}
}

// ipUDPHeader writes the IPv4 and UDP headers of a datagram from e to its
// relay port (RFC 791, RFC 768); the kernel fills the IP checksum and ID.
// The UDP checksum is 0: none, as IPv4 allows.
func ipUDPHeader(b []byte, e *endpoint, size int) {
	b[0], b[1] = 0x45, 0
	binary.BigEndian.PutUint16(b[2:], uint16(28+size))
	binary.BigEndian.PutUint32(b[4:], 0) // ID (kernel), flags, offset
	b[8], b[9] = 64, unix.IPPROTO_UDP
	b[10], b[11] = 0, 0
	src := e.local.Addr().As4()
	copy(b[12:16], src[:])
	copy(b[16:20], e.dest.Addr[:])
	binary.BigEndian.PutUint16(b[20:], e.local.Port())
	copy(b[22:24], (*[2]byte)(unsafe.Pointer(&e.dest.Port))[:]) // already in network order
	binary.BigEndian.PutUint16(b[24:], uint16(8+size))
	b[26], b[27] = 0, 0
}
