package bridge

import (
	"errors"
	"log/slog"
	"strings"
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
	// Queue bounds the RTCP packets waiting to leave, per kind (default
	// 1024).
	Queue int
	// Batch is how long a packet may wait for others going to the same
	// node before they leave as one message; 0 sends what has gathered as
	// soon as the sender runs. MaxBatch bounds a message's bytes (default
	// DefaultMaxBatch); a full one leaves at once.
	Batch    time.Duration
	MaxBatch int
	// Plug, when set, is held while a received message's packets are
	// published here, so the senders it stands for (the node's RTP
	// socket's writers) wake once for the message, not once a packet.
	Plug   Plug
	Logger *slog.Logger
	Now    func() time.Time
}

// Plug holds the wake-ups of the senders a burst of packets goes to until
// Release (udpmux.Socket).
type Plug interface {
	Hold()
	Release()
}

// Stats are the bridge's counters since it started.
type Stats struct {
	// PacketsOut and BytesOut are the packets sent and the bytes of their
	// messages (envelopes included); PacketsIn and BytesIn those received.
	PacketsOut, BytesOut, PacketsIn, BytesIn uint64
	// BatchesOut and BatchesIn count the media messages that carried the
	// RTP packets (a batch holds one or more).
	BatchesOut, BatchesIn uint64
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
	o     Options
	log   *slog.Logger
	out   [2]chan outgoing // RTCP, by media.Kind
	batch [2]*batcher      // RTP, by media.Kind
	unsub [2]func()        // the subscriptions to this node's batches

	mu    sync.Mutex
	spans map[*broker.Room]*span

	wg                                       sync.WaitGroup
	pktsOut, bytesOut, pktsIn, bytesIn, drop atomic.Uint64
	batchesOut, batchesIn                    atomic.Uint64
	closed                                   atomic.Bool
	// lastN numbers the node's exported tracks, across its rooms: with
	// the node's ID the number names a track across the cluster.
	lastN atomic.Uint32
	// routes are the other nodes' tracks this node pulls, by node and
	// number (route → *broker.Track): written when a pull starts or ends,
	// read without a lock by every record of every batch.
	routes sync.Map
}

type route struct {
	node string
	n    uint32
}

// outgoing is an RTCP packet on its way to the other nodes.
type outgoing struct {
	p       *media.Packet
	subject string
	owner   string // its sender's session member
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
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Batch < 0 {
		o.Batch = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Bridge{o: o, log: o.Logger.With("component", "bridge"), spans: map[*broker.Room]*span{}}
	for k, c := range []Conn{o.Audio, o.Video} {
		kind := media.Kind(k)
		unsub, err := c.Subscribe(batchSubject(o.Node, kind, "*"), func(subject string, data []byte) { b.receive(kind, subject, data) })
		if err != nil {
			if k > 0 {
				b.unsub[0]()
			}
			return nil, err
		}
		b.unsub[k] = unsub
	}
	for k, c := range []Conn{o.Audio, o.Video} {
		b.out[k] = make(chan outgoing, o.Queue)
		b.wg.Add(1)
		go b.send(c, b.out[k], media.Kind(k))
		b.batch[k] = newBatcher(b, c, media.Kind(k), o.Batch, o.MaxBatch)
	}
	return b, nil
}

// receive publishes the packets of a batch from another node, each on its
// track's member in the local room, where they fan out like a local
// sender's. Records of tracks this node does not pull (any more) are let
// go; a malformed record ends the batch and counts as dropped.
func (b *Bridge) receive(kind media.Kind, subject string, data []byte) {
	from := subject[strings.LastIndexByte(subject, '.')+1:]
	b.batchesIn.Add(1)
	b.bytesIn.Add(uint64(len(data)))
	if b.o.Plug != nil {
		b.o.Plug.Hold()
		defer b.o.Plug.Release()
	}
	err := parseBatch(data, func(n uint32, k media.Kind, pkt []byte) {
		v, ok := b.routes.Load(route{from, n})
		if !ok || k != kind || len(pkt) >= media.BufSize {
			return
		}
		t := v.(*broker.Track)
		if t.Kind() != kind {
			return
		}
		b.pktsIn.Add(1)
		p := media.NewPacket()
		p.SetLen(copy(p.Buffer(), pkt))
		t.Publish(p)
	})
	if err != nil {
		b.drop.Add(1)
	}
}

// pull routes node's track n to t until the returned func is called.
func (b *Bridge) pull(node string, n uint32, t *broker.Track) func() {
	k := route{node, n}
	b.routes.Store(k, t)
	return func() { b.routes.CompareAndDelete(k, t) }
}

// send publishes one kind's RTCP packets in the order they were queued.
func (b *Bridge) send(c Conn, q chan outgoing, kind media.Kind) {
	defer b.wg.Done()
	buf := make([]byte, 0, EnvelopeLen+media.BufSize)
	for o := range q {
		buf = appendEnvelope(buf[:0], 0, kind, true, o.owner, o.p.Bytes())
		o.p.Release()
		if err := c.Publish(o.subject, buf); err != nil {
			b.drop.Add(1)
			continue
		}
		b.pktsOut.Add(1)
		b.bytesOut.Add(uint64(len(buf)))
	}
}

// enqueue hands an RTCP packet to its kind's sender; it never blocks. It
// takes over the caller's reference.
func (b *Bridge) enqueue(p *media.Packet, kind media.Kind, subject, owner string) {
	select {
	case b.out[kind] <- outgoing{p: p, subject: subject, owner: owner}:
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
	for k, q := range b.out {
		close(q)
		b.unsub[k]()
		b.batch[k].stop()
	}
	b.wg.Wait()
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	st := Stats{PacketsOut: b.pktsOut.Load(), BytesOut: b.bytesOut.Load(), PacketsIn: b.pktsIn.Load(),
		BytesIn: b.bytesIn.Load(), BatchesOut: b.batchesOut.Load(), BatchesIn: b.batchesIn.Load(), Dropped: b.drop.Load()}
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

// batchSubject names node from's batches of one kind for node to: each
// kind has its own subject (and connection), so a node's audio and video
// subscriptions never both receive a message.
func batchSubject(to string, kind media.Kind, from string) string {
	k := ".a."
	if kind == media.Video {
		k = ".v."
	}
	return "convene.m." + to + k + from
}
