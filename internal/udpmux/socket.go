package udpmux

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
)

// ErrAddrInUse is returned by Register when the remote address already has a
// handler on the socket.
var ErrAddrInUse = errors.New("udpmux: remote address already registered")

// A Handler takes the datagrams that arrive from its registered address. It is
// handed one reference to p and must release it. It runs on the socket's read
// goroutine and must not block.
type Handler interface {
	HandleDatagram(p *media.Packet, from netip.AddrPort)
}

// Options configure a socket.
type Options struct {
	// Batch sends with sendmmsg; false sends one datagram per system call.
	Batch bool
	// QueueLimit bounds each of the writer's two queues (default 65536).
	QueueLimit int
	// Writers is the number of writer goroutines sharing the socket; each
	// destination always goes through the same one. 0: one per CPU, so a
	// large fan-out uses every core.
	Writers int
	// ReadBuffer and WriteBuffer set SO_RCVBUF/SO_SNDBUF when > 0. The
	// kernel caps both at net.core.rmem_max and wmem_max; a process
	// allowed to (CAP_NET_ADMIN) gets the receive buffer it asks for past
	// the cap (SO_RCVBUFFORCE).
	ReadBuffer, WriteBuffer int
	Logger                  *slog.Logger
}

// Stats are a socket's counters.
type Stats struct {
	Received      uint64 // datagrams read
	UnknownSource uint64 // dropped: no handler for the source address
	Latched       uint64 // sources learnt by a latch (an endpoint behind NAT)
	Oversize      uint64 // dropped: may have been truncated
	ReadErrors    uint64
	QueueDrops    uint64 // dropped by the writer: queue full or closing
	SendBatches   uint64 // sendmmsg calls
	// Delay is how long the writers' flushes waited in their queues,
	// counted by the oldest packet of each.
	Delay Delay
	// ReadDelay is how long each datagram read waited in the socket's
	// receive queue for the reader; SocketDrops the datagrams the kernel
	// dropped at the socket, its receive buffer full (recvinfo.go). Both
	// zero where the kernel does not say.
	ReadDelay   Delay
	SocketDrops uint64
}

// Socket is one UDP socket shared by many links.
type Socket struct {
	conn *net.UDPConn
	ws   []*writer
	log  *slog.Logger

	mu       sync.RWMutex
	handlers map[netip.AddrPort]Handler
	latches  map[netip.Addr][]*latch // endpoints waiting to learn their source, by IP (latch.go)

	received, unknown, oversize, readErrs, latched atomic.Uint64
	// The reader's accounting (recvinfo.go); info: the kernel gives it.
	raw       syscall.RawConn
	info      bool
	readDelay delays
	sockDrops atomic.Uint64
	closed    atomic.Bool
	readDone  chan struct{}
	closeOnce sync.Once
}

// Listen opens a socket on addr ("127.0.0.1:0" picks a port) and starts its
// reader and writer goroutines.
func Listen(addr string, o Options) (*Socket, error) {
	conn, err := ListenUDP(addr)
	if err != nil {
		return nil, err
	}
	return New(conn, o), nil
}

// New shares an open UDP socket and starts its goroutines. The socket owns
// conn from now on.
func New(conn *net.UDPConn, o Options) *Socket {
	if o.QueueLimit <= 0 {
		o.QueueLimit = 65536
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReadBuffer > 0 {
		SetReadBuffer(conn, o.ReadBuffer)
	}
	if o.WriteBuffer > 0 {
		_ = conn.SetWriteBuffer(o.WriteBuffer)
	}
	dontFragment(conn)
	raw, err := conn.SyscallConn()
	batch := o.Batch && err == nil
	v6 := false
	if err == nil {
		_ = raw.Control(func(fd uintptr) {
			dom, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
			v6 = err == nil && dom == unix.AF_INET6
		})
	}
	if o.Writers <= 0 {
		o.Writers = runtime.GOMAXPROCS(0)
	}
	senders := openSenders(conn, o.Writers, o.WriteBuffer)
	s := &Socket{
		conn:     conn,
		log:      o.Logger.With("socket", conn.LocalAddr().String()),
		handlers: map[netip.AddrPort]Handler{},
		latches:  map[netip.Addr][]*latch{},
		readDone: make(chan struct{}),
		raw:      raw,
		info:     enableRecvInfo(conn),
	}
	for i := 0; i < o.Writers; i++ {
		fd := -1
		if senders != nil {
			fd = senders[i]
		}
		w := newWriter(conn, raw, batch, v6, fd, o.QueueLimit)
		s.ws = append(s.ws, w)
		go w.run()
	}
	go s.read()
	return s
}

// SetReadBuffer sets conn's receive buffer to n bytes: past
// net.core.rmem_max where the process may (SO_RCVBUFFORCE), else up to it.
// The receive queue is what carries the reader through the moments the
// machine does not run it; what does not fit is dropped by the kernel.
func SetReadBuffer(conn *net.UDPConn, n int) {
	if rc, err := conn.SyscallConn(); err == nil {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		}); err == nil && serr == nil {
			return
		}
	}
	_ = conn.SetReadBuffer(n)
}

// dontFragment sets the DF bit on everything the socket sends, as WebRTC
// does for media: a datagram too large for the path is refused with
// EMSGSIZE (counted as a send error) instead of being fragmented. It also
// spares the kernel a hashed, randomised IP ID for every unfragmentable
// datagram, which profiles showed at about 7 % of the node's CPU in a large
// fan-out.
func dontFragment(conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
	})
}

// LocalAddr returns the socket's address.
func (s *Socket) LocalAddr() netip.AddrPort {
	return s.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Conn returns the underlying socket, for options such as multicast.
func (s *Socket) Conn() *net.UDPConn { return s.conn }

func norm(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// Register routes datagrams from remote to h.
func (s *Socket) Register(remote netip.AddrPort, h Handler) error {
	remote = norm(remote)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.handlers[remote]; ok {
		return fmt.Errorf("%w: %s", ErrAddrInUse, remote)
	}
	s.handlers[remote] = h
	return nil
}

// Unregister stops routing datagrams from remote.
func (s *Socket) Unregister(remote netip.AddrPort) {
	s.mu.Lock()
	delete(s.handlers, norm(remote))
	s.mu.Unlock()
}

// Send queues p for d. It takes over one reference to p and never blocks;
// it returns false when the packet was dropped.
func (s *Socket) Send(p *media.Packet, d *Dest) bool { return s.writerFor(d).send(p, d) }

func (s *Socket) writerFor(d *Dest) *writer { return s.ws[d.shard%uint32(len(s.ws))] }

// Hold keeps the socket's writers asleep until Release, while what is
// sent meanwhile queues: a caller about to send a burst (the packets of
// one bridged message, each fanned out to many destinations; several
// datagrams read at once) wakes each writer once for all of it instead of
// once a packet, and the writer sends it in one go. Every Hold needs its
// Release, soon: nothing queued leaves before it. Holds from several
// goroutines nest.
func (s *Socket) Hold() {
	for _, w := range s.ws {
		w.hold()
	}
}

// Release ends a Hold; writers with queued packets wake.
func (s *Socket) Release() {
	for _, w := range s.ws {
		w.release()
	}
}

// Stats returns the socket's counters.
func (s *Socket) Stats() Stats {
	st := Stats{
		Received:      s.received.Load(),
		UnknownSource: s.unknown.Load(),
		Latched:       s.latched.Load(),
		Oversize:      s.oversize.Load(),
		ReadErrors:    s.readErrs.Load(),
		SocketDrops:   s.sockDrops.Load(),
	}
	s.readDelay.add(&st.ReadDelay)
	for _, w := range s.ws {
		st.QueueDrops += w.drops.Load()
		st.SendBatches += w.batches.Load()
		w.delay.add(&st.Delay)
	}
	return st
}

func (s *Socket) read() {
	defer close(s.readDone)
	rb := newRecvBatch(s.raw, s.info)
	defer rb.release()
	for {
		n, err := rb.read()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.readErrs.Add(1)
			continue
		}
		// One clock read a burst: what the burst's datagrams waited is
		// counted to the moment the burst was read.
		var now time.Time
		if s.info {
			now = time.Now()
		}
		if n > 1 {
			s.Hold()
		}
		for i := range n {
			s.handle(rb.take(i))
			if s.info {
				s.account(rb.lastOOB, now)
			}
		}
		if n > 1 {
			s.Release()
		}
	}
}

// account counts what a datagram's control messages say (recvinfo.go).
func (s *Socket) account(oob []byte, now time.Time) {
	if len(oob) == 0 {
		return
	}
	ri := parseRecvInfo(oob)
	if ri.stampNs != 0 {
		s.readDelay.observe(waited(ri.stampNs, now))
	}
	if ri.hasDrops {
		s.sockDrops.Store(uint64(ri.drops))
	}
}

// handle routes one datagram read to its source's handler.
func (s *Socket) handle(p *media.Packet, n int, from netip.AddrPort) {
	s.received.Add(1)
	if n >= media.BufSize {
		s.oversize.Add(1)
		p.Release()
		return
	}
	p.SetLen(n)
	from = norm(from)
	s.mu.RLock()
	h := s.handlers[from]
	s.mu.RUnlock()
	if h == nil {
		h = s.latchFor(from, p.Bytes())
	}
	if h == nil {
		s.unknown.Add(1)
		p.Release()
		return
	}
	h.HandleDatagram(p, from)
}

// Close sends what is queued, then closes the socket and waits for its
// goroutines.
func (s *Socket) Close() error {
	var err error
	s.closeOnce.Do(func() {
		for _, w := range s.ws {
			w.close()
		}
		s.closed.Store(true)
		err = s.conn.Close()
		<-s.readDone
	})
	return err
}
