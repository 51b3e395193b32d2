package bridge

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// state is what a node says about its part of a session's room.
type state struct {
	Node string `json:"node"`
	// Hello asks the other nodes to send their state now (a room just
	// spanned); Gone says the node's room is closing.
	Hello bool `json:"hello,omitempty"`
	Gone  bool `json:"gone,omitempty"`
	// Tracks are the tracks the node's own links publish.
	Tracks []trackDesc `json:"tracks"`
	// Wants are, by node, the numbers of that node's tracks this node
	// receives.
	Wants map[string][]uint32 `json:"wants,omitempty"`
}

// trackDesc announces one track: enough for another node's room to place
// it (kind, the session member it belongs to, its subgroup) and for its
// receivers to decode it (broker.TrackInfo).
type trackDesc struct {
	N         uint32 `json:"n"`
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Owner     string `json:"owner,omitempty"`
	Group     string `json:"group,omitempty"`
	Codec     string `json:"codec,omitempty"`
	ClockRate uint32 `json:"clock,omitempty"`
	Channels  uint16 `json:"channels,omitempty"`
	Fmtp      string `json:"fmtp,omitempty"`
	Source    string `json:"source,omitempty"`
	Stream    string `json:"stream,omitempty"`
	Layer     int    `json:"layer,omitempty"`
	Primary   bool   `json:"primary,omitempty"`
}

// remotePrefix starts the room member IDs of other nodes' tracks.
const remotePrefix = "bridge:"

// export is a local track announced to the other nodes.
type export struct {
	n     uint32
	track *broker.Track
	desc  trackDesc
	to    atomic.Pointer[[]string] // the nodes that want it, sorted
	untap func()                   // set while some node wants it
}

// import_ is another node's track, a sending member of the local room.
type import_ struct {
	n      uint32 // desc.N, for other goroutines (askKeyframe)
	desc   trackDesc
	member string
	track  *broker.Track
	subs   atomic.Int32 // local subscribers (OnSubscribers)
	unsub  func()       // set while pulled
	asked  atomic.Int64 // when a keyframe was last asked for (unix ns)
}

// keyframeEvery bounds the keyframe requests one remote track sends its
// node; the sender throttles again (broker.Track.RequestKeyframe).
const keyframeEvery = 300 * time.Millisecond

type peer struct {
	seen   time.Time
	tracks map[uint32]*import_
	wants  []uint32 // this node's tracks the peer receives
}

type spanCounts struct{ remote, pulled, pushed int32 }

// span is one room spanned across nodes; run owns every field below
// `done`.
type span struct {
	b    *Bridge
	room *broker.Room
	sid  string
	in   chan state
	keys chan uint32 // keyframe requests for this node's tracks
	kick chan struct{}
	done chan struct{}
	end  chan struct{}

	unsubState, unsubKeys, unsubRTCP func()
	untapRTCP                        [2]func()
	// peered is set while other nodes have this session: the room's RTCP
	// goes to them only then.
	peered atomic.Bool
	counts atomic.Pointer[spanCounts]

	exports map[*broker.Track]*export
	peers   map[string]*peer
	hello   bool // another node asked for our state
	// lastPeered is when the span last had a peer: one that lost its
	// peers (NATS restarting, a partition) keeps announcing every
	// interval for lonelyFor, so both sides find each other again
	// within a second of the connection coming back.
	lastPeered time.Time
}

func newSpan(b *Bridge, r *broker.Room) (*span, error) {
	s := &span{b: b, room: r, sid: r.ID(), in: make(chan state, 64), keys: make(chan uint32, 16), kick: make(chan struct{}, 1),
		done: make(chan struct{}), end: make(chan struct{}), exports: map[*broker.Track]*export{}, peers: map[string]*peer{}}
	s.counts.Store(&spanCounts{})
	own := stateSubject(s.sid, b.o.Node)
	unsub, err := b.o.Control.Subscribe(stateSubject(s.sid, "*"), func(subject string, data []byte) {
		if subject == own { // our own announcement, back from NATS
			return
		}
		var st state
		if json.Unmarshal(data, &st) != nil || st.Node == "" || st.Node == b.o.Node {
			return
		}
		select {
		case s.in <- st:
		default: // the next periodic state puts it right
		}
	})
	if err != nil {
		return nil, err
	}
	s.unsubState = unsub
	if s.unsubKeys, err = b.o.Control.Subscribe(keySubject(s.sid, b.o.Node), func(_ string, data []byte) {
		if len(data) != 4 {
			return
		}
		select {
		case s.keys <- binary.BigEndian.Uint32(data):
		default:
		}
	}); err != nil {
		unsub()
		return nil, err
	}
	if s.unsubRTCP, err = b.o.Control.Subscribe(rtcpSubject(s.sid, "*"), s.remoteRTCP); err != nil {
		unsub()
		s.unsubKeys()
		return nil, err
	}
	for k := range s.untapRTCP {
		kind := media.Kind(k)
		s.untapRTCP[k] = r.TapRTCP(kind, rtcpTap{s, kind})
	}
	r.SetOnSenders(s.poke)
	go s.run()
	return s, nil
}

// rtcpTap sends the RTCP of the room's own endpoints to the other nodes
// (receiver reports back to remote senders, sender reports to remote
// receivers), one message per packet on convene.media.<session>.rtcp.<node>.
type rtcpTap struct {
	s    *span
	kind media.Kind
}

func (t rtcpTap) DeliverRTCP(p *media.Packet, owner string) {
	if !t.s.peered.Load() {
		p.Release()
		return
	}
	t.s.b.enqueue(p, t.kind, rtcpSubject(t.s.sid, t.s.b.o.Node), owner)
}

// remoteRTCP publishes another node's RTCP in the room, as its sender's
// owner's: it reaches every endpoint of its kind that takes RTCP but that
// owner's (no echo), and no tap (it never goes back across).
func (s *span) remoteRTCP(subject string, data []byte) {
	if node := subject[strings.LastIndexByte(subject, '.')+1:]; node == s.b.o.Node {
		return
	}
	_, kind, rtcp, rest, err := parseEnvelope(data)
	if err != nil || !rtcp {
		s.b.drop.Add(1)
		return
	}
	owner, pkt, err := parseRTCP(rest)
	if err != nil || len(pkt) < 8 || len(pkt) >= media.BufSize || media.ClassifyRTCP(pkt) != media.ClassRTCP {
		s.b.drop.Add(1)
		return
	}
	s.b.pktsIn.Add(1)
	s.b.bytesIn.Add(uint64(len(data)))
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), pkt))
	s.room.PublishRemoteRTCP(owner, kind, p)
}

// poke wakes the span's goroutine; it never blocks.
func (s *span) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *span) close() {
	close(s.done)
	<-s.end
}

// aloneEvery is how many announcement intervals a span with no peers
// waits between announcements. Peers find each other by the hello a span
// sends when it opens, and another node's hello makes a span announce at
// once; the periodic announcement refreshes what peers know (and their
// expiry) and repairs a lost message. Alone, there is nothing to refresh:
// a rarer announcement still repairs a hello lost while NATS reconnected,
// and a node with thousands of meetings and no other node does not wake,
// marshal and publish for each of them every second (its media waited
// behind those bursts).
const aloneEvery = 10

// interval is how often the span announces: Options.Announce while other
// nodes have the session (and for lonelyFor intervals after the last went),
// aloneEvery times that while none has.
func (s *span) interval() time.Duration {
	now := s.b.o.Now()
	if len(s.peers) > 0 {
		s.lastPeered = now
	}
	if len(s.peers) == 0 && (s.lastPeered.IsZero() || now.Sub(s.lastPeered) > lonelyFor*s.b.o.Announce) {
		return s.b.o.Announce * aloneEvery
	}
	return s.b.o.Announce
}

// lonelyFor is how many announcement intervals a span that lost its last
// peer goes on announcing every interval.
const lonelyFor = 30

// jitter spreads the spans' ticks: rooms opened together (a node's start,
// a benchmark's meetings) would otherwise tick in step.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

func (s *span) run() {
	defer close(s.end)
	every := s.b.o.Announce * aloneEvery // alone until a peer is heard
	tick := time.NewTicker(jitter(every))
	defer tick.Stop()
	s.sync()
	s.announce(true, false)
	for {
		if want := s.interval(); want != every {
			every = want
			tick.Reset(jitter(every))
		}
		periodic := false
		select {
		case <-s.done:
			s.teardown()
			return
		case st := <-s.in:
			s.apply(st)
		case n := <-s.keys:
			for _, e := range s.exports {
				if e.n == n {
					e.track.RequestKeyframe()
				}
			}
			continue
		case <-s.kick:
		case <-tick.C:
			s.expire()
			periodic = true
		}
		s.peered.Store(len(s.peers) > 0)
		if s.sync() || periodic || s.hello {
			s.hello = false
			s.announce(false, false)
		}
	}
}

// apply takes in another node's state.
func (s *span) apply(st state) {
	if st.Gone {
		s.dropPeer(st.Node)
		return
	}
	p := s.peers[st.Node]
	if p == nil {
		p = &peer{tracks: map[uint32]*import_{}}
		s.peers[st.Node] = p
	}
	p.seen = s.b.o.Now()
	p.wants = st.Wants[s.b.o.Node]
	s.hello = s.hello || st.Hello
	seen := map[uint32]bool{}
	for _, d := range st.Tracks {
		seen[d.N] = true
		if imp := p.tracks[d.N]; imp != nil {
			if imp.desc.ID == d.ID {
				if imp.desc.Group != d.Group {
					s.room.SetGroup(imp.member, d.Group)
				}
				imp.desc = d
				continue
			}
			s.leave(imp)
		}
		if imp := s.join(st.Node, d); imp != nil {
			p.tracks[d.N] = imp
		}
	}
	for n, imp := range p.tracks {
		if !seen[n] {
			s.leave(imp)
			delete(p.tracks, n)
		}
	}
}

// join makes another node's track a sending member of the room.
func (s *span) join(node string, d trackDesc) *import_ {
	kind, ok := media.ParseKind(d.Kind)
	if !ok {
		return nil
	}
	imp := &import_{n: d.N, desc: d, member: remotePrefix + node + ":" + strconv.Itoa(int(d.N))}
	stream := d.Stream
	if stream == "" {
		stream = d.ID
	}
	t, err := s.room.Join(broker.Member{ID: imp.member, Kind: kind, Sends: true, Owner: d.Owner, Group: d.Group,
		Info: broker.TrackInfo{Codec: d.Codec, ClockRate: d.ClockRate, Channels: d.Channels, Fmtp: d.Fmtp,
			Source: d.Source, Stream: stream, Layer: d.Layer, Primary: d.Primary},
		OnSubscribers: func(n int) { imp.subs.Store(int32(n)); s.poke() },
		Keyframe:      func() { s.askKeyframe(node, imp) }})
	if err != nil {
		s.b.log.Debug("remote track not joined", "session", s.sid, "node", node, "track", d.ID, "err", err)
		return nil
	}
	imp.track = t
	return imp
}

// askKeyframe passes a local receiver's keyframe request for a remote
// video track to its node, at most once per keyframeEvery. It runs on the
// receiver's goroutine: it only publishes.
func (s *span) askKeyframe(node string, imp *import_) {
	now := s.b.o.Now().UnixNano()
	last := imp.asked.Load()
	if now-last < int64(keyframeEvery) || !imp.asked.CompareAndSwap(last, now) {
		return
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], imp.n)
	if err := s.b.o.Control.Publish(keySubject(s.sid, node), n[:]); err != nil {
		s.b.log.Debug("ask for a keyframe", "session", s.sid, "node", node, "err", err)
	}
}

func (s *span) leave(imp *import_) {
	if imp.unsub != nil {
		imp.unsub()
		imp.unsub = nil
	}
	s.room.Leave(imp.member)
}

func (s *span) dropPeer(node string) {
	if p := s.peers[node]; p != nil {
		for _, imp := range p.tracks {
			s.leave(imp)
		}
		delete(s.peers, node)
	}
}

// expire forgets the nodes not heard for Options.Expire (stopped, cut off).
func (s *span) expire() {
	now := s.b.o.Now()
	for node, p := range s.peers {
		if now.Sub(p.seen) > s.b.o.Expire {
			s.b.log.Info("node's part of the session expired", "session", s.sid, "node", node)
			s.dropPeer(node)
		}
	}
}

// sync brings exports, taps and pulls in line with the room and the
// peers; it reports whether what this node announces changed.
func (s *span) sync() bool {
	changed := false
	present := map[*broker.Track]bool{}
	for _, snd := range s.room.Senders() {
		t := snd.Track
		if strings.HasPrefix(t.Publisher(), remotePrefix) {
			continue
		}
		present[t] = true
		e := s.exports[t]
		if e == nil {
			n := s.b.lastN.Add(1)
			e = &export{n: n, track: t}
			s.exports[t] = e
			changed = true
		}
		info := t.Info()
		d := trackDesc{N: e.n, ID: t.ID(), Kind: t.Kind().String(), Owner: t.Owner(), Group: snd.Group,
			Codec: info.Codec, ClockRate: info.ClockRate, Channels: info.Channels, Fmtp: info.Fmtp,
			Source: info.Source, Stream: info.Stream, Layer: info.Layer, Primary: info.Primary}
		if d.Stream == "" {
			d.Stream = t.Publisher()
		}
		if d != e.desc {
			e.desc, changed = d, true
		}
	}
	wanted := map[uint32][]string{}
	for node, p := range s.peers {
		for _, n := range p.wants {
			wanted[n] = append(wanted[n], node)
		}
	}
	c := spanCounts{}
	for t, e := range s.exports {
		if !present[t] {
			if e.untap != nil {
				e.untap()
			}
			delete(s.exports, t)
			changed = true
			continue
		}
		to := wanted[e.n]
		sort.Strings(to)
		if old := e.to.Load(); old == nil || !slices.Equal(*old, to) {
			e.to.Store(&to)
		}
		switch want := len(to) > 0; {
		case want && e.untap == nil:
			e.untap = s.room.Tap(t, remotePrefix+"tap", exportTap{s.b, e, t.Kind()})
		case !want && e.untap != nil:
			e.untap()
			e.untap = nil
		}
		if e.untap != nil {
			c.pushed++
		}
	}
	for node, p := range s.peers {
		for _, imp := range p.tracks {
			c.remote++
			switch want := imp.subs.Load() > 0; {
			case want && imp.unsub == nil:
				unsub, err := s.pull(node, imp)
				if err != nil {
					s.b.log.Warn("subscribe to remote track", "session", s.sid, "node", node, "track", imp.desc.ID, "err", err)
					continue
				}
				imp.unsub, changed = unsub, true
			case !want && imp.unsub != nil:
				imp.unsub()
				imp.unsub, changed = nil, true
			}
			if imp.unsub != nil {
				c.pulled++
			}
		}
	}
	s.counts.Store(&c)
	return changed
}

// exportTap copies a local track's packets into the batches of the nodes
// that want it.
type exportTap struct {
	b    *Bridge
	e    *export
	kind media.Kind
}

func (x exportTap) Deliver(p *media.Packet, _ *broker.Track) {
	if to := *x.e.to.Load(); len(to) > 0 {
		x.b.batch[x.kind].add(p.Bytes(), x.e.n, x.kind, to)
	}
	p.Release()
}

// pull takes a remote track's packets in from now on: the node's batches
// carry them once this node says it wants them, and each is published
// into the room on the track's member, fanning out here like a local
// sender's.
func (s *span) pull(node string, imp *import_) (func(), error) {
	return s.b.pull(node, imp.desc.N, imp.track), nil
}

// announce sends this node's state of the room.
func (s *span) announce(hello, gone bool) {
	st := state{Node: s.b.o.Node, Hello: hello, Gone: gone, Tracks: []trackDesc{}}
	if !gone {
		for _, e := range s.exports {
			st.Tracks = append(st.Tracks, e.desc)
		}
		sort.Slice(st.Tracks, func(i, j int) bool { return st.Tracks[i].N < st.Tracks[j].N })
		for node, p := range s.peers {
			for n, imp := range p.tracks {
				if imp.unsub != nil {
					if st.Wants == nil {
						st.Wants = map[string][]uint32{}
					}
					st.Wants[node] = append(st.Wants[node], n)
				}
			}
		}
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = s.b.o.Control.Publish(stateSubject(s.sid, s.b.o.Node), b)
	}
	if err != nil {
		s.b.log.Warn("announce room state", "session", s.sid, "err", err)
	}
}

// teardown ends the span: the others hear it is gone, remote members
// leave, taps end.
func (s *span) teardown() {
	s.room.SetOnSenders(nil)
	s.unsubState()
	s.unsubKeys()
	s.unsubRTCP()
	for _, untap := range s.untapRTCP {
		untap()
	}
	s.announce(false, true)
	for node := range s.peers {
		s.dropPeer(node)
	}
	for _, e := range s.exports {
		if e.untap != nil {
			e.untap()
		}
	}
	s.counts.Store(&spanCounts{})
}
