package broker

import (
	"encoding/binary"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/media"
)

// Recent is how long a simulcast layer counts as heard after its last
// packet. A browser sends its top layer only from a camera large enough
// and with bandwidth to spare (Chromium sends two of the web app's three
// layers from a 640×360 camera, none of the top one), and drops and adds
// layers as its bandwidth estimate moves: a receiver that takes one layer
// takes the highest heard within Recent, not a fixed one.
const Recent = 2 * time.Second

// askAgain is how long a receiver waiting to switch layers waits for a
// keyframe before it asks the publisher again (a PLI may be lost).
const askAgain = time.Second

// Source names a camera: a track of its own, or the simulcast source
// (owner and stream) whose layer it is.
type Source struct {
	track         *Track // without simulcast
	owner, stream string // a layer's
}

// SourceOf is the source t belongs to.
func SourceOf(t *Track) Source {
	if t.info.Layer == 0 {
		return Source{track: t}
	}
	return Source{owner: t.owner, stream: t.info.Stream}
}

// Heard returns when a simulcast layer last published a packet (zero
// before the first, and for a track without simulcast, which keeps no
// time).
func (t *Track) Heard() time.Time {
	ns := t.heard.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// heardWithin reports whether t counts as heard at now: a track without
// simulcast always does.
func heardWithin(t *Track, now time.Time) bool {
	if t.info.Layer == 0 {
		return true
	}
	h := t.heard.Load()
	return h != 0 && now.UnixNano()-h < int64(Recent)
}

// Highest returns, of one source's tracks, the highest layer heard within
// Recent of now; nil if none was.
func Highest(layers []*Track, now time.Time) *Track {
	var best *Track
	for _, t := range layers {
		if heardWithin(t, now) && (best == nil || t.info.Layer > best.info.Layer) {
			best = t
		}
	}
	return best
}

// HeardOf returns those of one source's tracks heard within Recent of now
// (a track without simulcast always counts), in their order; all of them
// if none was, so that a receiver still starts before the first packet.
func HeardOf(ts []*Track, now time.Time) []*Track {
	var out []*Track
	for _, t := range ts {
		if heardWithin(t, now) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return ts
	}
	return out
}

// HighestOf returns each source's highest layer among ts (a track without
// simulcast is its source's only one). The caller leaves out what it does
// not count as heard.
func HighestOf(ts []*Track) map[Source]*Track {
	best := make(map[Source]*Track, len(ts))
	for _, t := range ts {
		k := SourceOf(t)
		if b := best[k]; b == nil || t.info.Layer > b.info.Layer {
			best[k] = t
		}
	}
	return best
}

// Layers returns the room's tracks of t's source, lowest layer first: t
// alone for a track without simulcast.
func (r *Room) Layers(t *Track) []*Track {
	if t.info.Layer == 0 {
		return []*Track{t}
	}
	k := SourceOf(t)
	r.mu.Lock()
	var out []*Track
	for _, x := range r.tracks {
		if x.info.Layer != 0 && SourceOf(x) == k {
			out = append(out, x)
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].info.Layer < out[j].info.Layer })
	return out
}

// Best returns the track of t's source a receiver that takes one layer
// should take now: the highest layer heard within Recent, else (nothing
// heard yet, or all silent) the highest layer there is. A track without
// simulcast is its own best.
func (r *Room) Best(t *Track) *Track {
	ls := r.Layers(t)
	if len(ls) == 0 {
		return t // it left
	}
	r.mu.Lock()
	now := r.now()
	r.mu.Unlock()
	if b := Highest(ls, now); b != nil {
		return b
	}
	return ls[len(ls)-1]
}

// SetClock makes the room's tracks read the time from now (tests); call
// it before the first Join.
func (r *Room) SetClock(now func() time.Time) {
	r.mu.Lock()
	r.now = now
	r.mu.Unlock()
}

// layerPick is what a member that is not Layered subscribes to a
// simulcast source's layers through: it passes on the packets of one
// layer, the highest heard within Recent, and changes layers only on the
// new one's keyframe, asking the publisher for it. Until then it passes
// on the old layer, if that still sends.
//
// Until the first change the packets go on as they came (shared, no
// copy). From then on each is a copy with the first layer's SSRC and
// sequence numbers and timestamps that run on across the change, so the
// member's endpoint (a SIP phone, ffmpeg) sees one stream, not a new
// SSRC whose numbers jump.
//
// A OneStream member has one layerPick for all the tracks it hears (its
// key's Source is zero): a change of the tracks it hears (Room.SetFrom,
// a video phone following the speaker) is a change of layers like any
// other, and the pick stays, with its stream's numbers, while the member
// is in the room, even while it hears no track.
type layerPick struct {
	sink Sink
	// layers are the source's layers the member is subscribed to;
	// written under the room's mu, copy on write.
	layers atomic.Pointer[[]*Track]

	mu          sync.Mutex // a leaf: never held while calling out
	cur, target *Track     // the layer passed on; the one to change to
	asked       time.Time  // when target's publisher was last asked for a keyframe
	out         continuity // what went out, for the copies after a change
}

// continuity rewrites the packets of a layerPick after its first change
// of layers (under its mu).
type continuity struct {
	started, rewrite bool
	ssrc             uint32 // the stream's SSRC: its first layer's
	seqOff           uint16 // subtracted from the current layer's …
	tsOff            uint32
	lastSeq          uint16 // … to continue from these
	lastTS           uint32
	lastAt           time.Time
}

// change sets the offsets that make the first packet of a new layer
// (seq, ts at now) follow the last one sent, a frame's time later at
// least.
func (c *continuity) change(seq uint16, ts uint32, now time.Time, rate uint32) {
	gap := uint32(max(1, now.Sub(c.lastAt).Seconds()*float64(rate)))
	c.seqOff, c.tsOff, c.rewrite = seq-(c.lastSeq+1), ts-(c.lastTS+gap), true
}

// copyOf returns, after the first change, a copy of p (shared with
// other receivers) with the stream's SSRC and the numbers next gave;
// nil before it, when p goes on as it is.
func (c *continuity) copyOf(p *media.Packet, seq uint16, ts uint32) *media.Packet {
	if !c.rewrite {
		return nil
	}
	b := p.Bytes()
	out := media.NewPacket()
	w := out.Buffer()[:len(b)]
	copy(w, b)
	binary.BigEndian.PutUint16(w[2:], seq)
	binary.BigEndian.PutUint32(w[4:], ts)
	binary.BigEndian.PutUint32(w[8:], c.ssrc)
	out.SetLen(len(b))
	out.Kind = p.Kind
	return out
}

// next notes the packet (ssrc, seq, ts) going out and returns its
// numbers: as they came before the first change, else rewritten.
func (c *continuity) next(ssrc uint32, seq uint16, ts uint32, now time.Time) (uint16, uint32) {
	if !c.started {
		c.started, c.ssrc = true, ssrc
	}
	seq, ts = seq-c.seqOff, ts-c.tsOff
	if int16(seq-c.lastSeq) > 0 || c.lastAt.IsZero() {
		c.lastSeq, c.lastTS, c.lastAt = seq, ts, now
	}
	return seq, ts
}

type pickKey struct {
	member string
	src    Source
}

// Deliver passes p on if it is of the layer chosen, and changes layers
// on a keyframe of the new one.
func (lp *layerPick) Deliver(p *media.Packet, from *Track) {
	var now time.Time
	if from.info.Layer != 0 {
		now = time.Unix(0, from.heard.Load()) // Publish stamped it just now
	} else {
		now = from.now() // a OneStream member's track without simulcast keeps no time
	}
	best := Highest(*lp.layers.Load(), now)
	var ask *Track
	lp.mu.Lock()
	if best != nil && best != lp.target {
		lp.target, lp.asked, ask = best, now, best
	}
	b := p.Bytes()
	ok := len(b) >= 12
	pass := ok && from == lp.cur
	if ok && !pass && from == lp.target {
		if lp.cur == nil || keyframeOf(from, p) {
			if lp.cur != nil && lp.out.started {
				lp.out.change(binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:]), now, rateOf(from))
			}
			lp.cur, pass = from, true
		} else if now.Sub(lp.asked) >= askAgain {
			lp.asked, ask = now, from
		}
	}
	var out *media.Packet
	if pass {
		seq, ts := lp.out.next(binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:]), now)
		out = lp.out.copyOf(p, seq, ts) // p is shared: a copy of its own
	}
	lp.mu.Unlock()
	if ask != nil {
		ask.RequestKeyframe()
	}
	switch {
	case !pass:
		p.Release()
	case out != nil:
		p.Release()
		lp.sink.Deliver(out, from)
	default:
		lp.sink.Deliver(p, from)
	}
}

// rateOf is a video track's RTP clock rate (90 kHz unless it says).
func rateOf(t *Track) uint32 {
	if r := t.info.ClockRate; r != 0 {
		return r
	}
	return 90000
}

// keyframeOf reports whether p starts a keyframe of t's codec; a video
// track whose publisher named no codec is VP8 (a plain RTP endpoint, as
// the SFU, ffmpeg.VideoStream and vtranscode.SourceCodec read it).
func keyframeOf(t *Track, p *media.Packet) bool {
	b := p.Bytes()
	off, ok := media.PayloadOffset(b)
	codec := t.info.Codec
	if codec == "" && t.kind == media.Video {
		codec = "video/VP8"
	}
	return ok && off < len(b) && media.Keyframe(codec, b[off:])
}

// subscribeLocked subscribes member id (m) to track t: straight to its
// sink, or for a simulcast layer and a member that is not Layered,
// through the source's layerPick, or for a OneStream member through its
// own. Under mu.
func (r *Room) subscribeLocked(t *Track, id string, m Member) {
	if m.Layered || (t.info.Layer == 0 && !m.OneStream) {
		t.subscribe(id, m.Sink)
		return
	}
	k := pickKey{id, SourceOf(t)}
	if m.OneStream {
		k = pickKey{member: id}
	}
	lp := r.picks[k]
	if lp == nil {
		lp = &layerPick{sink: m.Sink}
		lp.layers.Store(&[]*Track{})
		r.picks[k] = lp
	}
	if _, ok := t.subscribed[id]; !ok {
		next := append(append([]*Track(nil), *lp.layers.Load()...), t)
		lp.layers.Store(&next)
	}
	t.subscribe(id, lp)
}

// unsubscribeLocked undoes subscribeLocked. Under mu.
func (r *Room) unsubscribeLocked(t *Track, id string) {
	t.unsubscribe(id)
	r.dropLayerLocked(id, t)
}

// dropLayerLocked takes track t out of member id's pick: the source's,
// which goes with its last layer, or the OneStream member's, which stays
// (Leave takes it away). Under mu.
func (r *Room) dropLayerLocked(id string, t *Track) {
	k := pickKey{id, SourceOf(t)}
	lp := r.picks[k]
	if lp == nil {
		k = pickKey{member: id}
		if lp = r.picks[k]; lp == nil {
			return
		}
	}
	var next []*Track
	for _, x := range *lp.layers.Load() {
		if x != t {
			next = append(next, x)
		}
	}
	if len(next) == 0 && k.src != (Source{}) {
		delete(r.picks, k)
		return
	}
	lp.layers.Store(&next)
}
