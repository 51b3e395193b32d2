package broker

import (
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/media"
)

// A Sink receives the packets of the tracks its member subscribes to.
//
// Deliver is handed one reference to p and must Release it, now or later.
// It must not block: a sink that cannot keep up drops and counts.
type Sink interface {
	Deliver(p *media.Packet, from *Track)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(p *media.Packet, from *Track)

// Deliver calls f.
func (f SinkFunc) Deliver(p *media.Packet, from *Track) { f(p, from) }

type subscriber struct {
	member string
	sink   Sink
}

// Track is the media of one kind sent by one member.
type Track struct {
	id        string
	kind      media.Kind
	publisher string
	subs      atomic.Pointer[[]subscriber]
	// subscribed is the members in subs, for subscribe's check; guarded
	// by the room's mu.
	subscribed map[string]struct{}

	packets atomic.Uint64
	bytes   atomic.Uint64

	// gated is set while floor control forbids the publisher to send this
	// kind; Publish then drops and counts in gateDrops. One atomic load per
	// packet is the whole cost when floor control is off.
	gated     atomic.Bool
	gateDrops atomic.Uint64

	info     TrackInfo    // set at Join, then read-only
	owner    string       // Member.Owner
	keyframe func()       // Member.Keyframe
	firstPT  atomic.Int32 // the first packet's payload type + 1; 0 before it
	told     int          // subscribers last told to Member.OnSubscribers; guarded by the room's mu

	// A simulcast layer's last packet, Unix ns by now (the room's clock),
	// for Recent; 0 before the first. Tracks without simulcast keep none.
	heard atomic.Int64
	now   func() time.Time
}

// Owner returns the session member whose endpoint publishes the track ("" for none).
func (t *Track) Owner() string { return t.owner }

// Info returns what the publisher said about the track.
func (t *Track) Info() TrackInfo { return t.info }

// PayloadType returns the RTP payload type of the first packet published,
// and false before there was one.
func (t *Track) PayloadType() (uint8, bool) {
	v := t.firstPT.Load()
	return uint8(v - 1), v != 0
}

// RequestKeyframe asks the publisher for a keyframe, if it can be asked.
func (t *Track) RequestKeyframe() {
	if t.keyframe != nil {
		t.keyframe()
	}
}

func newTrack(id, publisher string, kind media.Kind) *Track {
	t := &Track{id: id, kind: kind, publisher: publisher, subscribed: map[string]struct{}{}, now: time.Now}
	t.subs.Store(&[]subscriber{})
	return t
}

// ID returns the track's identifier.
func (t *Track) ID() string { return t.id }

// Kind returns the track's media kind.
func (t *Track) Kind() media.Kind { return t.kind }

// Publisher returns the ID of the member that sends the track.
func (t *Track) Publisher() string { return t.publisher }

// Subscribers returns how many members receive the track.
func (t *Track) Subscribers() int { return len(*t.subs.Load()) }

// Stats returns the packets and bytes published on the track.
func (t *Track) Stats() (packets, bytes uint64) { return t.packets.Load(), t.bytes.Load() }

// Publish sends p to every subscriber. It takes over the caller's reference.
// It takes no lock and allocates nothing.
func (t *Track) Publish(p *media.Packet) {
	if t.gated.Load() {
		t.gateDrops.Add(1)
		p.Release()
		return
	}
	p.Kind = t.kind
	if t.firstPT.Load() == 0 && p.Len() >= 2 {
		t.firstPT.Store(int32(p.Bytes()[1]&0x7f) + 1)
	}
	t.packets.Add(1)
	t.bytes.Add(uint64(p.Len()))
	if t.info.Layer != 0 {
		t.heard.Store(t.now().UnixNano())
	}
	subs := *t.subs.Load()
	if len(subs) == 0 {
		p.Release()
		return
	}
	p.Retain(len(subs) - 1)
	for i := range subs {
		subs[i].sink.Deliver(p, t)
	}
}

// SetGated closes (true) or opens (false) the track's floor gate. While it
// is closed, Publish drops every packet and counts it in GateDrops.
func (t *Track) SetGated(closed bool) { t.gated.Store(closed) }

// Gated reports whether the floor gate is closed.
func (t *Track) Gated() bool { return t.gated.Load() }

// GateDrops returns how many packets the floor gate dropped.
func (t *Track) GateDrops() uint64 { return t.gateDrops.Load() }

// subscribe and unsubscribe are called with the room's mutex held.
//
// subscribe appends in place when the slice has room: a Publish running
// now holds a slice no longer than the current one and never reads past
// its length, and no slice that shares the array is longer (unsubscribe
// makes a new array), so the new element is nobody's until the Store
// publishes it. Growth is amortised: a join to a track of N subscribers
// used to copy all N (a listener joining a 10,000-listener meeting copied
// 320 KB, and a flash crowd's joins took the CPU its packets needed).
func (t *Track) subscribe(member string, s Sink) {
	if _, ok := t.subscribed[member]; ok {
		return
	}
	next := append(*t.subs.Load(), subscriber{member: member, sink: s})
	t.subs.Store(&next)
	t.subscribed[member] = struct{}{}
}

func (t *Track) unsubscribe(member string) {
	if _, ok := t.subscribed[member]; !ok {
		return
	}
	delete(t.subscribed, member)
	old := *t.subs.Load()
	next := make([]subscriber, 0, len(old))
	for _, x := range old {
		if x.member != member {
			next = append(next, x)
		}
	}
	t.subs.Store(&next)
}
