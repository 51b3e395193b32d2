package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Errors returned by the control methods.
var (
	ErrUnknownCall = errors.New("relay: unknown call")
	ErrClosed      = errors.New("relay: closed")
	ErrNoPorts     = errors.New("relay: no free ports in range")
	ErrBadSDP      = errors.New("relay: bad SDP")
	// ErrLimit: the offer (or answer) would take more streams than a call,
	// a user or a signalling source may hold; nothing was allocated.
	ErrLimit = errors.New("relay: stream limit reached")
)

// Defaults of the Options that bound what one party may take and send.
const (
	DefaultMaxPacket           = 1500
	DefaultLatchWindow         = 3 * time.Second
	DefaultMaxStreamsPerCall   = 4
	DefaultMaxStreamsPerUser   = 64
	DefaultMaxStreamsPerSource = 256
)

// Options configure a Relay.
type Options struct {
	// Addr is the IP address the relay's sockets bind and that rewritten SDP
	// advertises. It must be a specific address, not 0.0.0.0 or ::.
	Addr string
	// PortMin and PortMax bound the UDP ports used; each side of a stream
	// takes an even port for RTP and the next one for RTCP.
	PortMin, PortMax int
	// Timeout ends a call that relayed no packet for this long (default 60s).
	Timeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Registry, when set, gets the relay's metrics (convene_relay_*).
	Registry prometheus.Registerer

	// Workers is the number of forwarding goroutines (default GOMAXPROCS).
	Workers int
	// Batch is the number of datagrams read or sent per system call
	// (default 32).
	Batch int
	// Kernel forwards established IPv4 flows inside the kernel (package
	// kfwd) when the process may load eBPF programs; otherwise, or when
	// loading fails, the relay logs why and forwards in user space.
	Kernel bool

	// MaxPacket is the largest UDP payload relayed, by the workers and by
	// the kernel alike; larger datagrams are dropped as oversize (default
	// DefaultMaxPacket, at most bufSize-1).
	MaxPacket int
	// LatchWindow is how long after each offer or answer a side that
	// announced a private or unknown address in its SDP (a party behind
	// NAT) may latch onto a source of another IP (default
	// DefaultLatchWindow). See latch.go.
	LatchWindow time.Duration
	// MaxStreamsPerCall, MaxStreamsPerUser and MaxStreamsPerSource cap the
	// streams (relayed m= lines, two port pairs each) one call, one
	// authenticated SIP user and one signalling source IP may hold at a
	// time; an offer over a cap fails with ErrLimit (defaults
	// DefaultMaxStreamsPer*).
	MaxStreamsPerCall, MaxStreamsPerUser, MaxStreamsPerSource int

	// clock is the media timeout's and the latch window's time (tests
	// inject one; default time.Now).
	clock func() time.Time
}

// Relay forwards the media of proxied calls. Its methods are safe for
// concurrent use.
type Relay struct {
	o      Options
	log    *slog.Logger
	addr   netip.Addr
	socks  []atomic.Pointer[sock] // by port - PortMin, for the workers' epoll events
	ws     []*worker
	next   int // worker for the next stream
	st     counters
	doneCh chan struct{}
	wg     sync.WaitGroup
	k      *kernelState // nil: user space only

	poolMu sync.Mutex
	ports  *portPool // guarded by poolMu

	mu      sync.Mutex
	calls   map[string]*call
	users   map[string]int     // streams held per authenticated user
	sources map[netip.Addr]int // streams held per signalling source IP
	closed  bool
}

// New opens a relay and starts its workers.
func New(o Options) (*Relay, error) {
	addr, err := netip.ParseAddr(o.Addr)
	if err != nil || addr.IsUnspecified() {
		return nil, fmt.Errorf("relay: address %q: want a specific IP address to bind and advertise", o.Addr)
	}
	addr = addr.Unmap()
	if o.PortMin < 1 || o.PortMax > 65535 || o.PortMax < o.PortMin+1 {
		return nil, fmt.Errorf("relay: port range %d-%d: want 1 <= min < max <= 65535", o.PortMin, o.PortMax)
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.MaxPacket <= 0 {
		o.MaxPacket = DefaultMaxPacket
	}
	if o.MaxPacket >= bufSize {
		return nil, fmt.Errorf("relay: max packet %d: want at most %d bytes", o.MaxPacket, bufSize-1)
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	if o.LatchWindow <= 0 {
		o.LatchWindow = DefaultLatchWindow
	}
	for _, v := range []struct {
		p   *int
		def int
	}{{&o.MaxStreamsPerCall, DefaultMaxStreamsPerCall}, {&o.MaxStreamsPerUser, DefaultMaxStreamsPerUser},
		{&o.MaxStreamsPerSource, DefaultMaxStreamsPerSource}} {
		if *v.p <= 0 {
			*v.p = v.def
		}
	}
	r := &Relay{
		o:       o,
		log:     o.Logger.With("component", "relay"),
		addr:    addr,
		ports:   newPortPool(o.PortMin, o.PortMax),
		socks:   make([]atomic.Pointer[sock], o.PortMax-o.PortMin+1),
		calls:   map[string]*call{},
		users:   map[string]int{},
		sources: map[netip.Addr]int{},
		doneCh:  make(chan struct{}),
	}
	if o.Kernel {
		r.openKernel()
	}
	for i := 0; i < o.Workers; i++ {
		w, err := newWorker(r)
		if err != nil {
			for _, w := range r.ws {
				w.stop()
			}
			if r.k != nil {
				r.k.f.Close()
			}
			return nil, err
		}
		r.ws = append(r.ws, w)
	}
	for _, w := range r.ws {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); w.run() }()
	}
	if o.Registry != nil {
		if err := o.Registry.Register(newCollector(r)); err != nil {
			r.Close()
			return nil, fmt.Errorf("relay: metrics: %w", err)
		}
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.sweep() }()
	r.log.Info("relay started", "addr", addr.String(), "ports", fmt.Sprintf("%d-%d", o.PortMin, o.PortMax),
		"workers", o.Workers, "timeout", o.Timeout, "kernel", r.k != nil)
	return r, nil
}

// Addr returns the address the relay binds and advertises.
func (r *Relay) Addr() netip.Addr { return r.addr }

// Offer handles the SDP offer of the endpoint tagged fromTag (the caller in
// an INVITE, or either party in a re-INVITE): it records where that endpoint
// wants media, allocates the call's ports if they are new, and returns the
// SDP to forward to the other party, pointing at the relay. An offer on an
// existing call keeps its ports.
//
// user is the authenticated SIP user who sent the offer ("" if none) and
// source the IP address it came from (the zero Addr if unknown). A new
// call is charged to them: its streams count against
// Options.MaxStreamsPerUser and MaxStreamsPerSource as long as it lasts,
// and an offer that would exceed a cap, or MaxStreamsPerCall, fails with an
// error wrapping ErrLimit and allocates nothing. The source is also an
// address the offerer's media may come from (latch.go).
func (r *Relay) Offer(callID, fromTag string, sdp []byte, user string, source netip.Addr) ([]byte, error) {
	if callID == "" || fromTag == "" {
		return nil, errors.New("relay: offer needs a call-id and a from-tag")
	}
	d, err := parseSDP(sdp)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	c, isNew := r.calls[callID], false
	if c == nil {
		c, isNew = &call{id: callID, tags: [2]string{fromTag, ""}, lastMove: r.o.clock(), user: user,
			source: source.Unmap()}, true
	}
	x := c.sideOf(fromTag)
	if x < 0 {
		if c.tags[1] != "" {
			return nil, fmt.Errorf("relay: call %q: from-tag %q is neither party's", callID, fromTag)
		}
		x, c.tags[0] = 0, fromTag // a new offer before any answer replaces the first one
	}
	out, err := r.apply(c, x, d, source.Unmap())
	if err != nil {
		if isNew {
			r.release(c)
		}
		return nil, err
	}
	if isNew {
		r.calls[callID] = c
		r.st.calls.Add(1)
		r.log.Debug("call created", "call_id", callID, "streams", len(c.streams))
	}
	return out, nil
}

// Answer handles the SDP answer of the endpoint tagged toTag to an offer
// from fromTag on an existing call, and returns the SDP to forward to the
// offerer, pointing at the relay.
func (r *Relay) Answer(callID, fromTag, toTag string, sdp []byte, source netip.Addr) ([]byte, error) {
	if toTag == "" {
		return nil, errors.New("relay: answer needs a to-tag")
	}
	d, err := parseSDP(sdp)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	c := r.calls[callID]
	if c == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCall, callID)
	}
	x := c.sideOf(toTag)
	if x < 0 {
		// The first answer (or a later fork's) names the answering side.
		x = 1
		if c.tags[1] == fromTag && c.tags[0] != fromTag {
			x = 0
		}
		c.tags[x] = toTag
	}
	return r.apply(c, x, d, source)
}

// Delete ends a call and releases its ports; when it returns, the ports are
// closed.
func (r *Relay) Delete(callID string) error {
	done, err := r.end(callID)
	for _, ch := range done {
		<-ch
	}
	return err
}

// Release ends a call like Delete but returns at once: the call's workers
// close its ports (and take its flows out of the kernel) right after. For
// callers that must not wait on a worker, such as the SIP proxy's.
func (r *Relay) Release(callID string) error {
	_, err := r.end(callID)
	return err
}

func (r *Relay) end(callID string) ([]chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[callID]
	if c == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCall, callID)
	}
	delete(r.calls, callID)
	r.log.Debug("call deleted", "call_id", callID)
	return r.release(c), nil
}

// Calls returns the number of active calls.
func (r *Relay) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Close ends every call, stops the workers and closes every socket.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	var done []chan struct{}
	for id, c := range r.calls {
		delete(r.calls, id)
		done = append(done, r.release(c)...)
	}
	r.mu.Unlock()
	for _, ch := range done {
		<-ch
	}
	close(r.doneCh)
	for _, w := range r.ws {
		w.stop()
	}
	r.wg.Wait()
	for _, w := range r.ws {
		w.closeFDs()
	}
	if r.k != nil {
		r.k.f.Close()
	}
	r.log.Info("relay stopped")
	return nil
}

// apply records d as side x's media description (sent by that party from
// sig, if valid), creating streams as needed within the caps, and returns d
// rewritten to point at the other side's sockets. r.mu is held.
func (r *Relay) apply(c *call, x int, d *sdpDesc, sig netip.Addr) ([]byte, error) {
	n := 0
	for i, m := range d.media {
		if m.port != 0 && m.relayed && (i >= len(c.streams) || c.streams[i] == nil) {
			n++
		}
	}
	if err := r.admit(c, n); err != nil {
		return nil, err
	}
	for i, m := range d.media {
		if m.port == 0 || !m.relayed {
			continue
		}
		for len(c.streams) <= i {
			c.streams = append(c.streams, nil) // nil: a disabled m= line
		}
		if c.streams[i] == nil {
			st, err := r.newStream(c)
			if err != nil {
				return nil, err
			}
			c.streams[i] = st
			r.charge(c, 1)
		}
	}
	until := r.o.clock().Add(r.o.LatchWindow)
	y := 1 - x
	ports := make([]int, len(d.media))
	for i, m := range d.media {
		if i >= len(c.streams) || c.streams[i] == nil || m.port == 0 || !m.relayed {
			continue
		}
		st := c.streams[i]
		if sig.IsValid() {
			st.sides[x].sig = sig
		}
		st.sides[x].update(m, r.addr)
		st.raw.Store(!m.rtp)
		r.kflush(st)
		ports[i] = st.sides[y].rtp.port
	}
	// Either party may start sending now: both may learn (latch.go).
	for _, st := range c.streams {
		if st != nil {
			st.sides[0].learn(until, r.addr)
			st.sides[1].learn(until, r.addr)
		}
	}
	return d.rewrite(r.addr, ports)
}
