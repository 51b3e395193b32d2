package broker

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/media"
)

// Errors returned by Room.
var (
	ErrMemberExists = errors.New("broker: member already in room")
	ErrRoomClosed   = errors.New("broker: room closed")
)

// Member describes an endpoint joining a room.
type Member struct {
	ID       string
	Kind     media.Kind
	Sends    bool // the member publishes a track of Kind
	Receives bool // the member subscribes to other members' tracks of Kind
	// Sink receives RTP of the tracks the member subscribes to.
	Sink Sink
	// RTCPSink, if set, receives RTCP that other members of the same kind send.
	RTCPSink Sink
	// Group is the subgroup the member is in; "" is the main session. Media
	// flows only between members of the same group (RTCP, which carries
	// reports and no media, still reaches every member of the kind).
	Group string
	// Gated starts the member's track with its floor gate closed
	// (Track.SetGated), so nothing leaks before floor control says so.
	Gated bool
	// From, when set, makes a receiving member hear only the tracks of
	// that owner (a video phone hears its session's composite alone).
	From string
	// Owner is the session member the endpoint belongs to ("" for none).
	// No echo holds per owner: a member's media, from any of its
	// endpoints, never reaches another endpoint of the same owner.
	Owner string
	// Info describes the track the member sends (codec, source, simulcast
	// layer); Track.Info returns it.
	Info TrackInfo
	// Layered receivers pick among a simulcast source's layers themselves
	// and get all of them; the others get one layer of each source at a
	// time, the highest heard within Recent (layerPick, layers.go).
	Layered bool
	// OneStream receivers (a video phone that follows the speaker) take
	// every track they hear as one stream: all of them go through one
	// layerPick of the member, kept while it is in the room, so a change
	// of the tracks heard (SetFrom) is a change of layers: it waits for
	// the new track's keyframe, asking for it, and the packets go on with
	// the first track's SSRC and sequence numbers and timestamps that run
	// on. Not with Layered.
	OneStream bool
	// OnChange, if set, is called (outside the room's lock, from the
	// goroutine that changed the room) after the set of tracks the member
	// is subscribed to changed; Room.Subscribed lists them. It must not
	// block.
	OnChange func()
	// Keyframe, if set, asks the sender of the member's video track for a
	// keyframe (Track.RequestKeyframe); the sender throttles.
	Keyframe func()
	// OnSubscribers, if set, is called (outside the room's lock, like
	// OnChange) with the number of subscribers of the member's track,
	// taps included, whenever it changed: the cross-node bridge pulls a
	// remote track only while it has local subscribers. It must not block.
	OnSubscribers func(n int)
}

// TrackInfo describes a track for receivers that need more than its bytes.
type TrackInfo struct {
	// Codec is the RTP payload's MIME type ("audio/opus", "audio/PCMU",
	// "video/VP8", "video/H264"); "" if the sender did not say (a plain
	// RTP endpoint): Track.PayloadType then tells the first packet's type.
	Codec     string
	ClockRate uint32
	Channels  uint16
	Fmtp      string
	// Source says what the track carries: "microphone", "camera",
	// "screen", "composite" (the node's video composite of the session's
	// cameras), or "rtp" for a plain endpoint.
	Source string
	// Stream groups the tracks a receiver shows together: the layers of
	// one simulcast source, and a member's microphone with its camera (it
	// is the media stream a browser sees); "" means the publisher's ID.
	Stream string
	// Layer is 0 for a track without simulcast, else 1 (lowest) to 3.
	Layer int
	// Primary marks the top layer the publisher declared. It need not be
	// sent (see Recent): receivers that are not Layered get the highest
	// layer heard instead.
	Primary bool
}

// hears reports whether a receiving member r is subscribed to the track of
// publisher p: same kind, same subgroup, not itself and not the same owner.
func hears(r Member, rid string, p Member, pid string) bool {
	if rid == pid || r.Kind != p.Kind || r.Group != p.Group || !r.Receives || r.Sink == nil {
		return false
	}
	if r.From != "" && p.Owner != r.From {
		return false
	}
	return r.Owner == "" || r.Owner != p.Owner
}

type rtcpSub struct {
	member string
	owner  string
	sink   Sink
	// A tap (TapRTCP) instead of a member: no member or sink.
	tap   RTCPTap
	tapID *byte
}

// Room is the media of one session: its members and their tracks.
type Room struct {
	id string

	mu      sync.Mutex // guards members, tracks, closed; never held while calling a Sink
	members map[string]Member
	tracks  map[string]*Track // by publishing member ID
	closed  bool

	rtcp [2]atomic.Pointer[[]rtcpSub] // copy-on-write, by Kind

	// changed collects, under mu, the OnChange callbacks of members whose
	// subscriptions a mutation changed; unlock calls them after mu is
	// released.
	changed []func()
	// watched are the tracks whose member set OnSubscribers; unlock tells
	// each whose count differs from the last it was told.
	watched map[*Track]func(int)
	// picks are the layerPicks of the members that are not Layered, by
	// member and simulcast source.
	picks map[pickKey]*layerPick
	// now is the clock the tracks stamp their layers' packets with.
	now func() time.Time
	// onSenders, if set, is called after a track was added or removed or
	// its member changed subgroup (SetOnSenders).
	onSenders      func()
	sendersChanged bool
}

// lock takes the room's mutex; unlock releases it and then tells the
// members whose subscriptions changed.
func (r *Room) lock() { r.mu.Lock() }

func (r *Room) unlock() {
	fs := r.changed
	r.changed = nil
	for t, f := range r.watched {
		if n := len(*t.subs.Load()); n != t.told {
			t.told = n
			fs = append(fs, func() { f(n) })
		}
	}
	if r.sendersChanged && r.onSenders != nil {
		fs = append(fs, r.onSenders)
	}
	r.sendersChanged = false
	r.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// touch notes that member id's subscriptions changed; mu is held.
func (r *Room) touch(id string) {
	if m, ok := r.members[id]; ok && m.OnChange != nil {
		r.changed = append(r.changed, m.OnChange)
	}
}

// NewRoom returns an empty room.
func NewRoom(id string) *Room {
	r := &Room{id: id, members: map[string]Member{}, tracks: map[string]*Track{}, watched: map[*Track]func(int){},
		picks: map[pickKey]*layerPick{}, now: time.Now}
	for k := range r.rtcp {
		r.rtcp[k].Store(&[]rtcpSub{})
	}
	return r
}

// ID returns the room's identifier (its session's ID).
func (r *Room) ID() string { return r.id }

// Join adds a member. If the member sends, Join returns the track it must
// publish its packets on; otherwise the track is nil. The member is
// subscribed to every existing track of its kind, and every receiving member
// of that kind to its new track, except to its own.
func (r *Room) Join(m Member) (*Track, error) {
	r.lock()
	defer r.unlock()
	if r.closed {
		return nil, ErrRoomClosed
	}
	if _, ok := r.members[m.ID]; ok {
		return nil, ErrMemberExists
	}
	r.members[m.ID] = m
	if m.Receives && m.Sink != nil {
		for pub, t := range r.tracks {
			if hears(m, m.ID, r.members[pub], pub) {
				r.subscribeLocked(t, m.ID, m)
				r.touch(m.ID)
			}
		}
	}
	var own *Track
	if m.Sends {
		own = newTrack(m.ID+"/"+m.Kind.String(), m.ID, m.Kind)
		own.gated.Store(m.Gated)
		own.info = m.Info
		own.owner = m.Owner
		own.keyframe = m.Keyframe
		own.now = r.now
		for id, o := range r.members {
			if hears(o, id, m, m.ID) {
				r.subscribeLocked(own, id, o)
				r.touch(id)
			}
		}
		r.tracks[m.ID] = own
		if m.OnSubscribers != nil {
			own.told = -1
			r.watched[own] = m.OnSubscribers
		}
		r.sendersChanged = true
	}
	if m.RTCPSink != nil {
		old := *r.rtcp[m.Kind].Load()
		next := append(append(make([]rtcpSub, 0, len(old)+1), old...), rtcpSub{member: m.ID, owner: m.Owner, sink: m.RTCPSink})
		r.rtcp[m.Kind].Store(&next)
	}
	return own, nil
}

// Leave removes a member, its track and its subscriptions. Packets already
// handed to its sink stay the sink's to release.
func (r *Room) Leave(id string) {
	r.lock()
	defer r.unlock()
	m, ok := r.members[id]
	if !ok {
		return
	}
	if own := r.tracks[id]; own != nil {
		for _, s := range *own.subs.Load() {
			r.touch(s.member)
			r.dropLayerLocked(s.member, own)
		}
		delete(r.watched, own)
		r.sendersChanged = true
	}
	delete(r.members, id)
	delete(r.tracks, id)
	for _, t := range r.tracks {
		if t.kind == m.Kind {
			r.unsubscribeLocked(t, id)
		}
	}
	delete(r.picks, pickKey{member: id}) // a OneStream member's
	if m.RTCPSink != nil {
		old := *r.rtcp[m.Kind].Load()
		next := make([]rtcpSub, 0, len(old))
		for _, s := range old {
			if s.member != id {
				next = append(next, s)
			}
		}
		r.rtcp[m.Kind].Store(&next)
	}
}

// SetGroup moves a member to another subgroup ("" is the main session): it
// stops receiving the tracks of its old group, receives those of the new
// one, and its own track reaches only the new group's members.
func (r *Room) SetGroup(id, group string) {
	r.lock()
	defer r.unlock()
	m, ok := r.members[id]
	if !ok || m.Group == group {
		return
	}
	m.Group = group
	r.members[id] = m
	own := r.tracks[id]
	for pub, t := range r.tracks {
		if pub == id || t.kind != m.Kind {
			continue
		}
		if hears(m, id, r.members[pub], pub) {
			r.subscribeLocked(t, id, m)
		} else {
			r.unsubscribeLocked(t, id)
		}
	}
	r.touch(id)
	if own != nil {
		r.sendersChanged = true
		for oid, o := range r.members {
			if oid == id || o.Kind != m.Kind {
				continue
			}
			if hears(o, oid, m, id) {
				r.subscribeLocked(own, oid, o)
			} else {
				r.unsubscribeLocked(own, oid)
			}
			r.touch(oid)
		}
	}
}

// SetFrom changes whose tracks member id hears (Member.From; "" for
// everyone's it hears otherwise) and subscribes it accordingly. A
// OneStream member goes on with one stream (its layerPick).
func (r *Room) SetFrom(id, from string) {
	r.lock()
	defer r.unlock()
	m, ok := r.members[id]
	if !ok || m.From == from {
		return
	}
	m.From = from
	r.members[id] = m
	for pub, t := range r.tracks {
		if pub == id || t.kind != m.Kind {
			continue
		}
		if hears(m, id, r.members[pub], pub) {
			r.subscribeLocked(t, id, m)
		} else {
			r.unsubscribeLocked(t, id)
		}
	}
	r.touch(id)
}

// PublishRTCP sends an RTCP packet from member `from` of the given kind to
// every other member of that kind that takes RTCP, except the other
// endpoints of the same owner (Member.Owner), and to the RTCP taps
// (TapRTCP). It takes over the caller's reference.
func (r *Room) PublishRTCP(from string, kind media.Kind, p *media.Packet) {
	subs := *r.rtcp[kind].Load()
	owner := ""
	for i := range subs {
		if subs[i].member == from {
			owner = subs[i].owner
			break
		}
	}
	r.deliverRTCP(subs, kind, p, from, owner, false)
}

// PublishRemoteRTCP sends an RTCP packet that an endpoint of owner on
// another node sent (the cross-node bridge) to every member of the kind
// that takes RTCP, except owner's endpoints; not to the RTCP taps, so it
// never goes back across. It takes over the caller's reference.
func (r *Room) PublishRemoteRTCP(owner string, kind media.Kind, p *media.Packet) {
	r.deliverRTCP(*r.rtcp[kind].Load(), kind, p, "", owner, true)
}

func (r *Room) deliverRTCP(subs []rtcpSub, kind media.Kind, p *media.Packet, from, owner string, remote bool) {
	p.Kind = kind
	p.RTCP = true
	skip := func(s rtcpSub) bool {
		if s.tap != nil {
			return remote
		}
		return (from != "" && s.member == from) || (owner != "" && s.owner == owner)
	}
	n := 0
	for i := range subs {
		if !skip(subs[i]) {
			n++
		}
	}
	if n == 0 {
		p.Release()
		return
	}
	p.Retain(n - 1)
	for i := range subs {
		switch {
		case skip(subs[i]):
		case subs[i].tap != nil:
			subs[i].tap.DeliverRTCP(p, owner)
		default:
			subs[i].sink.Deliver(p, nil)
		}
	}
}

// RTCPTap takes the RTCP a room's own endpoints send (TapRTCP).
type RTCPTap interface {
	// DeliverRTCP takes over a reference to p, sent by an endpoint of
	// owner ("" for none). It must not block.
	DeliverRTCP(p *media.Packet, owner string)
}

// TapRTCP hands tap every RTCP packet of the kind that the room's own
// endpoints send (PublishRTCP), with its sender's owner, and none that
// came from another node (PublishRemoteRTCP). untap ends it.
func (r *Room) TapRTCP(kind media.Kind, tap RTCPTap) (untap func()) {
	id := new(byte) // a unique identity for this tap's entry
	r.mu.Lock()
	old := *r.rtcp[kind].Load()
	next := append(append(make([]rtcpSub, 0, len(old)+1), old...), rtcpSub{tap: tap, tapID: id})
	r.rtcp[kind].Store(&next)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		old := *r.rtcp[kind].Load()
		next := make([]rtcpSub, 0, len(old))
		for _, s := range old {
			if s.tapID != id {
				next = append(next, s)
			}
		}
		r.rtcp[kind].Store(&next)
	}
}

// Close marks the room closed: no member may join any more.
func (r *Room) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Subscribed returns the tracks member id is subscribed to, ordered by ID.
func (r *Room) Subscribed(id string) []*Track {
	r.mu.Lock()
	m, ok := r.members[id]
	var ts []*Track
	if ok {
		for pub, t := range r.tracks {
			if hears(m, id, r.members[pub], pub) {
				ts = append(ts, t)
			}
		}
	}
	r.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
	return ts
}

// Members returns the number of members.
func (r *Room) Members() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members)
}

// Tracks returns the room's tracks ordered by ID.
func (r *Room) Tracks() []*Track {
	r.mu.Lock()
	ts := make([]*Track, 0, len(r.tracks))
	for _, t := range r.tracks {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
	return ts
}

// Tap makes s receive every packet of track t as a subscriber outside the
// room's membership (a transcoder, a recorder): subgroups and echo rules
// do not apply to it, the floor gate does. id names the tap and must not
// be a member's ID. Untap with the returned function; a tap ends by itself
// when the track's member leaves.
func (r *Room) Tap(t *Track, id string, s Sink) (untap func()) {
	r.lock()
	t.subscribe(id, s)
	r.unlock()
	return func() {
		r.lock()
		t.unsubscribe(id)
		r.unlock()
	}
}

// Sender is a track of the room with its member's subgroup.
type Sender struct {
	Track *Track
	Group string
}

// Senders returns the room's tracks with their members' subgroups,
// ordered by track ID.
func (r *Room) Senders() []Sender {
	r.mu.Lock()
	out := make([]Sender, 0, len(r.tracks))
	for pub, t := range r.tracks {
		out = append(out, Sender{Track: t, Group: r.members[pub].Group})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Track.id < out[j].Track.id })
	return out
}

// SetOnSenders makes f be called (outside the room's lock, from the
// goroutine that changed the room) after a track was added or removed or
// its member moved to another subgroup: the cross-node bridge announces
// the room's tracks then. f must not block; nil stops the calls.
func (r *Room) SetOnSenders(f func()) {
	r.mu.Lock()
	r.onSenders = f
	r.mu.Unlock()
}
