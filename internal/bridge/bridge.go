package bridge

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Conn is what the bridge needs of a NATS connection (node adapts
// *nats.Conn). Publish must not keep data after it returns. handler is
// called from the subscription's own goroutine, in order, and must not
// keep data after it returns.
type Conn interface {
	Publish(subject string, data []byte) error
	Subscribe(subject string, handler func(subject string, data []byte)) (unsubscribe func(), err error)
}

// Options configure a Bridge.
type Options struct {
	// Node is this node's ID, a valid subject token.
	Node string
	// Control carries the state messages; Audio and Video the packets of
	// each kind (they may be one connection, at the cost of audio waiting
	// behind video).
	Control, Audio, Video Conn
	// Announce is how often a room's state is sent again (default 1 s);
	// Expire how long another node's state lasts unheard (default 3 s).
	Announce, Expire time.Duration
	// Queue bounds the packets waiting to leave, per kind (default 1024).
	Queue  int
	Logger *slog.Logger
	Now    func() time.Time
}

// Stats are the bridge's counters since it started.
type Stats struct {
	// PacketsOut and BytesOut are the messages sent and their bytes
	// (envelope included); PacketsIn and BytesIn those received.
	PacketsOut, BytesOut, PacketsIn, BytesIn uint64
	// Dropped counts packets dropped: a full queue, a failed publish, a
	// malformed message.
	Dropped uint64
	// Rooms spanned now; RemoteTracks other nodes' tracks in them;
	// Pulled of those, the ones this node receives; Pushed this node's
	// tracks other nodes receive.
	Rooms, RemoteTracks, Pulled, Pushed int
}

// Bridge spans rooms across nodes. Attach it to a broker with
// broker.Broker.Watch(b.Open, b.Close).
type Bridge struct {
	o   Options
	log *slog.Logger
	out [2]chan outgoing // by media.Kind

	mu    sync.Mutex
	spans map[*broker.Room]*span

	wg                                       sync.WaitGroup
	pktsOut, bytesOut, pktsIn, bytesIn, drop atomic.Uint64
	closed                                   atomic.Bool
	// lastN numbers the node's exported tracks, across its rooms: the
	// number alone names a track's subject.
	lastN atomic.Uint32
}

type outgoing struct {
	p       *media.Packet
	n       uint32
	subject string
	owner   string // RTCP: its sender's session member
}

// New starts a bridge's senders.
func New(o Options) (*Bridge, error) {
	if o.Node == "" || o.Control == nil || o.Audio == nil || o.Video == nil {
		return nil, errors.New("bridge: Node, Control, Audio and Video are required")
	}
	if o.Announce <= 0 {
		o.Announce = time.Second
	}
	if o.Expire <= 0 {
		o.Expire = 3 * o.Announce
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Bridge{o: o, log: o.Logger.With("component", "bridge"), spans: map[*broker.Room]*span{}}
	for k, c := range []Conn{o.Audio, o.Video} {
		b.out[k] = make(chan outgoing, o.Queue)
		b.wg.Add(1)
		go b.send(c, b.out[k], media.Kind(k))
	}
	return b, nil
}

// send publishes one kind's packets in the order they were queued.
func (b *Bridge) send(c Conn, q chan outgoing, kind media.Kind) {
	defer b.wg.Done()
	buf := make([]byte, 0, EnvelopeLen+media.BufSize)
	for o := range q {
		buf = appendEnvelope(buf[:0], o.n, kind, o.p.RTCP, o.owner, o.p.Bytes())
		o.p.Release()
		if err := c.Publish(o.subject, buf); err != nil {
			b.drop.Add(1)
			continue
		}
		b.pktsOut.Add(1)
		b.bytesOut.Add(uint64(len(buf)))
	}
}

// enqueue hands a packet of local track n to its kind's sender; it never
// blocks. It takes over the caller's reference.
func (b *Bridge) enqueue(p *media.Packet, kind media.Kind, n uint32, subject, owner string) {
	select {
	case b.out[kind] <- outgoing{p: p, n: n, subject: subject, owner: owner}:
	default:
		b.drop.Add(1)
		p.Release()
	}
}

// Open spans a room across the nodes that have the same session.
func (b *Bridge) Open(r *broker.Room) {
	if b.closed.Load() {
		return
	}
	s, err := newSpan(b, r)
	if err != nil {
		b.log.Error("span room", "session", r.ID(), "err", err)
		return
	}
	b.mu.Lock()
	b.spans[r] = s
	b.mu.Unlock()
}

// Close stops spanning a room: its remote members leave, its taps end,
// and the other nodes hear that its tracks are gone.
func (b *Bridge) Close(r *broker.Room) {
	b.mu.Lock()
	s := b.spans[r]
	delete(b.spans, r)
	b.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// Shutdown closes every span and stops the senders.
func (b *Bridge) Shutdown() {
	if b.closed.Swap(true) {
		return
	}
	b.mu.Lock()
	spans := b.spans
	b.spans = map[*broker.Room]*span{}
	b.mu.Unlock()
	for _, s := range spans {
		s.close()
	}
	for _, q := range b.out {
		close(q)
	}
	b.wg.Wait()
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	st := Stats{PacketsOut: b.pktsOut.Load(), BytesOut: b.bytesOut.Load(), PacketsIn: b.pktsIn.Load(),
		BytesIn: b.bytesIn.Load(), Dropped: b.drop.Load()}
	b.mu.Lock()
	defer b.mu.Unlock()
	st.Rooms = len(b.spans)
	for _, s := range b.spans {
		c := s.counts.Load()
		st.RemoteTracks += int(c.remote)
		st.Pulled += int(c.pulled)
		st.Pushed += int(c.pushed)
	}
	return st
}

// Subjects (doc.go).
func stateSubject(session, node string) string { return "convene.media." + session + ".state." + node }
func keySubject(session, node string) string   { return "convene.media." + session + ".key." + node }
func rtcpSubject(session, node string) string  { return "convene.media." + session + ".rtcp." + node }
func dataSubject(node string, n uint32) string {
	return "convene.m." + node + "." + strconv.FormatUint(uint64(n), 10)
}
