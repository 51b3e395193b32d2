package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/catalog"
)

// Floors says whether a member may draw on the session's board (holds the
// "data" floor, or the floor is free for all); *session.Service adapts.
type Floors interface {
	MayDraw(sessionID, memberID string) bool
}

// Notes puts an accepted message on the time line of the session's
// recordings. It is given every flow's but the pointer's (see New).
type Notes interface {
	NoteMessage(sessionID, memberID string, flow uint32, seq uint64, wire []byte)
}

// noPointer keeps the pointer's positions off the recordings' time line:
// up to ten a second per member while a pointer moves, and a playback
// replays only the chat (strokes and notes stay on the time line, where
// a viewer of the manifest finds them).
type noPointer struct{ Notes }

func (n noPointer) NoteMessage(sessionID, memberID string, flow uint32, seq uint64, wire []byte) {
	if flow != FlowPointer {
		n.Notes.NoteMessage(sessionID, memberID, flow, seq, wire)
	}
}

// Options configure a Service.
type Options struct {
	Catalog *catalog.Store
	// Relay, if set, carries the conversations to and from the cluster's
	// other nodes (relay.go).
	Relay  Relay
	Floors Floors
	Notes  Notes
	Logger *slog.Logger
	Now    func() time.Time
	// CatchUp are the delays after a hub opens at which it reads the
	// catalog for what the relay missed (catchup.go); default catchUpAfter.
	CatchUp []time.Duration
}

// Service is the node's conversations, one hub per session with sockets.
type Service struct {
	o    Options
	log  *slog.Logger
	m    *metrics
	mu   sync.Mutex
	hubs map[string]*hub
}

// New returns a Service; reg takes its metrics.
func New(o Options, reg prometheus.Registerer) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CatchUp == nil {
		o.CatchUp = catchUpAfter
	}
	if o.Notes != nil {
		o.Notes = noPointer{o.Notes}
	}
	s := &Service{o: o, log: o.Logger, m: newMetrics(), hubs: map[string]*hub{}}
	if reg != nil {
		s.m.register(reg)
	}
	return s
}

// outFrame is a frame for a socket: binary (a message) or text (JSON).
type outFrame struct {
	bin  []byte
	text []byte
}

// Conn is one member's socket in its session's conversation.
type Conn struct {
	h      *hub
	n      uint32
	member string
	out    chan outFrame
	closed chan struct{}
	once   sync.Once
	tokens float64
	refill time.Time
	// got holds, while its hub catches up (catchup.go), the messages the
	// socket was sent (hello or live); nil after. Guarded by the hub's mu.
	got map[msgKey]struct{}
	// helloLast is its hello's Last while its hub catches up: what is at
	// or below a sender's was the hello's to give (history, or left out
	// of it on purpose, as the pointer's positions are).
	helloLast map[uint32]uint64
}

// Attach numbers the member (the first time) and opens its socket's place
// in the session's conversation. The caller writes Frames to the socket
// until Done, and hands Receive what the socket reads.
func (s *Service) Attach(ctx context.Context, sessionID, memberID, name string) (*Conn, error) {
	n, created, err := s.o.Catalog.ConversationMemberN(ctx, sessionID, memberID, name)
	if err != nil {
		return nil, err
	}
	h, err := s.hub(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	c := &Conn{h: h, n: n, member: memberID, out: make(chan outFrame, MaxQueue), closed: make(chan struct{}),
		tokens: Burst, refill: s.o.Now()}
	// The hello and the registration under the hub's lock: a message is
	// either in the hello's history or forwarded to the socket, never
	// neither.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen != nil {
		c.got = map[msgKey]struct{}{}
	}
	hello, err := h.hello(ctx, n, c.got)
	if err != nil {
		return nil, err
	}
	if c.got != nil {
		c.helloLast = hello.Last
	}
	if _, known := h.members[n]; created || !known {
		h.members[n] = catalog.ConversationMember{MemberID: memberID, N: n, Name: name}
		hello.Members[n] = Member{ID: memberID, Name: name}
		f, _ := json.Marshal(MemberFrame{Type: "member", N: n, Member: Member{ID: memberID, Name: name}})
		for o := range h.conns {
			o.push(outFrame{text: f})
		}
		h.publish(append([]byte{relayMember}, f...))
	}
	b, _ := json.Marshal(hello)
	c.out <- outFrame{text: b}
	h.conns[c] = struct{}{}
	s.m.sockets.Inc()
	return c, nil
}

// Next is the next frame to write: binary (a message) or text; ok is
// false once the Conn is closed.
func (c *Conn) Next(ctx context.Context) (b []byte, binary, ok bool) {
	select {
	case f := <-c.out:
		if f.bin != nil {
			return f.bin, true, true
		}
		return f.text, false, true
	case <-c.closed:
		return nil, false, false
	case <-ctx.Done():
		return nil, false, false
	}
}

// push queues a frame; a socket whose queue is full is closed (its reader
// is too slow, and messages are never dropped silently). Called with the
// hub's lock held.
func (c *Conn) push(f outFrame) {
	select {
	case c.out <- f:
	default:
		c.h.s.m.dropped.WithLabelValues("slow_socket").Inc()
		c.close()
	}
}

// Receive takes a binary frame the socket read: a message. A refused one
// is answered with an error frame; the socket stays open.
func (c *Conn) Receive(b []byte) {
	err := c.take(b)
	if err == nil {
		return
	}
	code := "refused"
	switch err {
	case ErrRate:
		code = "rate_limited"
	case ErrFloor:
		code = "floor"
	case ErrStorage:
		code = "unavailable"
	}
	c.h.s.m.refused.WithLabelValues(code).Inc()
	f, _ := json.Marshal(ErrorFrame{Type: "error", Code: code, Message: err.Error()})
	c.h.mu.Lock()
	c.push(outFrame{text: f})
	c.h.mu.Unlock()
}

func (c *Conn) take(b []byte) error {
	if len(b) > MaxMessage {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooBig, len(b), MaxMessage)
	}
	now := c.h.s.o.Now()
	c.tokens = min(Burst, c.tokens+now.Sub(c.refill).Seconds()*Rate)
	c.refill = now
	if c.tokens < 1 {
		return ErrRate
	}
	c.tokens--
	return c.h.accept(c, b)
}

// Text handles a text frame the socket read; none is defined yet, so it
// is answered with an error.
func (c *Conn) Text(b []byte) {
	f, _ := json.Marshal(ErrorFrame{Type: "error", Code: "refused", Message: "send messages as binary frames"})
	c.h.mu.Lock()
	c.push(outFrame{text: f})
	c.h.mu.Unlock()
}

func (c *Conn) close() {
	c.once.Do(func() { close(c.closed) })
}

// Close takes the socket out of its session's conversation.
func (c *Conn) Close() {
	c.h.mu.Lock()
	_, was := c.h.conns[c]
	delete(c.h.conns, c)
	c.h.mu.Unlock()
	c.close()
	if was {
		c.h.s.m.sockets.Dec()
	}
}

// SessionEnded closes the sockets of a session that ended and forgets its
// hub (a session's hub lives as long as the session on this node: a few
// maps, bounded by sessions.max).
func (s *Service) SessionEnded(sessionID string) {
	s.mu.Lock()
	h := s.hubs[sessionID]
	delete(s.hubs, sessionID)
	s.mu.Unlock()
	if h == nil {
		return
	}
	if h.unrelay != nil {
		h.unrelay()
	}
	close(h.done)
	h.mu.Lock()
	conns := make([]*Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Done is closed when the socket should be hung up (too slow).
func (c *Conn) Done() <-chan struct{} { return c.closed }
