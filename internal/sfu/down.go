package sfu

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/transcode"
	"github.com/convene/convene/internal/vtranscode"
)

// downTrack is one remote track of a subscriber connection: one source of
// one kind, fed by one or more broker tracks (a simulcast source's layers;
// for a WHEP viewer, every source of the kind), of which it forwards one.
type downTrack struct {
	// Read for every packet of every input, by the publishers' fan-out
	// (subSink.Deliver): kept together at the front, so that a packet
	// costs each of a thousand subscribers as few cache lines as can be.
	p      *Peer
	kind   media.Kind
	target atomic.Pointer[broker.Track] // the input to switch to
	cur    atomic.Pointer[broker.Track] // the input forwarded now
	// plain says that no input reaches the track through a transcoder
	// and the track is not one the node transcodes video for (transcoded
	// empty, recode ""): Deliver then need not look at either.
	plain atomic.Bool

	key    string
	desc   TrackDesc
	clock  uint32
	local  *localTrack
	sender *webrtc.RTPSender
	hist   *history // video: what was sent, to answer NACKs
	// recode is the codec of a video track when the node transcodes
	// video ("" otherwise): an input of another codec reaches it through
	// a video transcoder of vtarget (vtranscode), never as it is. It
	// changes once, when the receiver took another codec (rebind);
	// vtarget is the control goroutine's.
	recode  atomic.Pointer[string]
	vtarget vtranscode.Target
	// transcoded are the inputs that reach this (Opus) track through a
	// transcoder (a phone's G.711), and those whose codec is not known
	// yet; the room's own packets of these inputs are not forwarded.
	// Written by the control goroutine, copy on write.
	transcoded atomic.Pointer[map[*broker.Track]transcoding]

	inputs atomic.Pointer[[]*broker.Track] // by layer, lowest first
	manual atomic.Int32                    // chosen layer; 0 = by estimate

	// The writer goroutine's own.
	started        bool
	seqOff         uint16
	tsOff          uint32
	lastSeq        uint16
	lastTS         uint32
	lastAt         time.Time
	pkt            rtp.Packet
	hdr            rtp.Header
	forwarded      atomic.Uint64
	dropped        atomic.Uint64
	waitedKeyframe atomic.Uint64

	// From the subscriber's receiver reports.
	loss, jitter, rtt atomic.Uint64 // float64 bits

	// What the track's sender reports say (report.go), kept by write and
	// resend, which run on different goroutines.
	srMu    sync.Mutex
	srCount uint32    // packets sent
	srBytes uint32    // their payload octets
	srTS    uint32    // the newest frame's RTP timestamp
	srAt    time.Time // when its first packet went
}

func f64(a *atomic.Uint64) float64       { return math.Float64frombits(a.Load()) }
func setF64(a *atomic.Uint64, v float64) { a.Store(math.Float64bits(v)) }

// subSink is the broker.Sink of a subscriber's receiving links.
type subSink struct{ p *Peer }

// Deliver queues a packet for the writer if the subscriber forwards its
// track now; it never blocks.
func (s subSink) Deliver(pk *media.Packet, from *broker.Track) {
	p := s.p
	d := (*p.routes.Load())[from]
	if d == nil {
		pk.Release()
		p.resync()
		return
	}
	if from != d.target.Load() && from != d.cur.Load() {
		pk.Release()
		return
	}
	if p.shed(d.kind, from) {
		pk.Release()
		p.s.m.shed.Inc()
		return
	}
	if d.plain.Load() {
		p.enqueue(d, pk, from)
		return
	}
	if tc, ok := (*d.transcoded.Load())[from]; ok {
		pk.Release()
		if tc.stop == nil && (tc.refused.IsZero() || time.Since(tc.refused) > retryRefused) {
			p.resync() // its codec is known now: transcode it or not
		}
		return
	}
	if rc := *d.recode.Load(); rc != "" {
		if needs, known := vtranscode.Needs(from, rc); needs || !known {
			pk.Release() // never another codec's bytes: a transcoder is due
			p.resync()
			return
		}
	}
	p.enqueue(d, pk, from)
}

// retryRefused is how long an input whose video transcoder was refused
// waits before it is asked for again.
const retryRefused = 5 * time.Second

// transcoding is how an input reaches a track through a transcoder: stop
// ends it; nil while the input's codec is not known yet, or while its
// video transcoder is refused (since refused, for err).
type transcoding struct {
	stop func()
	// keyframe passes the receiver's PLI to a video transcoder.
	keyframe func()
	refused  time.Time
	err      error
}

// transcode makes the G.711 inputs of an Opus track reach it as Opus,
// each through the node's transcoder of that input (shared with every
// other browser that hears it), and stops those no longer inputs. Called
// by the control goroutine.
func (p *Peer) transcode(d *downTrack, inputs []*broker.Track) {
	hub := p.s.cfg.Transcode
	old := *d.transcoded.Load()
	if hub == nil || d.kind != media.Audio || d.clock != codecOpus.ClockRate {
		return
	}
	next := make(map[*broker.Track]transcoding, len(old))
	for _, t := range inputs {
		if tc := old[t]; tc.stop != nil {
			next[t] = tc
			continue
		}
		if _, g711 := transcode.Source(t); !g711 {
			if _, known := t.PayloadType(); !known && t.Info().Codec == "" {
				next[t] = transcoding{} // not forwarded until we know
			}
			continue
		}
		stop, err := hub.ToOpus(p.broom, t, broker.SinkFunc(func(pk *media.Packet, from *broker.Track) {
			if from != d.target.Load() && from != d.cur.Load() {
				pk.Release()
				return
			}
			p.enqueue(d, pk, from)
		}))
		if err != nil {
			p.s.log.Warn("webrtc transcode", "session", p.session, "member", p.member, "track", t.ID(), "err", err)
			continue
		}
		next[t] = transcoding{stop: stop}
	}
	d.setTranscoded(next)
	for t, tc := range old {
		if _, ok := next[t]; !ok && tc.stop != nil {
			tc.stop()
		}
	}
}

// transcodeVideo makes the input a video track forwards now (its target
// and the one it still sends) reach it through a video transcoder when
// its codec is not the track's, shared with every receiver of the same
// class; it stops the transcoders of inputs no longer forwarded. Only
// those: a WHEP viewer's inputs are every camera of the session. Called
// by the control goroutine.
func (p *Peer) transcodeVideo(d *downTrack) {
	hub := p.s.cfg.Video
	recode := *d.recode.Load()
	if hub == nil || recode == "" {
		return
	}
	old := *d.transcoded.Load()
	target, cur := d.target.Load(), d.cur.Load()
	next := make(map[*broker.Track]transcoding, len(old))
	for _, t := range *d.inputs.Load() {
		needs, known := vtranscode.Needs(t, recode)
		if !known {
			next[t] = transcoding{} // not forwarded until we know
			continue
		}
		if !needs || (t != target && t != cur) {
			continue
		}
		if tc := old[t]; tc.stop != nil || (!tc.refused.IsZero() && time.Since(tc.refused) < retryRefused) {
			next[t] = tc
			continue
		}
		src := t
		sub, err := hub.Subscribe(p.broom, t, d.vtarget, broker.SinkFunc(func(pk *media.Packet, _ *broker.Track) {
			if src != d.target.Load() && src != d.cur.Load() {
				pk.Release()
				p.resync() // not forwarded any more: its transcoder can stop
				return
			}
			p.enqueue(d, pk, src)
		}))
		if err != nil {
			p.s.log.Warn("webrtc video transcode refused", "session", p.session, "member", p.member, "track", t.ID(),
				"codec", recode, "err", err)
			next[t] = transcoding{refused: time.Now(), err: err}
			continue
		}
		next[t] = transcoding{stop: sub.Stop, keyframe: sub.Keyframe}
	}
	d.setTranscoded(next)
	for t, tc := range old {
		if n, ok := next[t]; (!ok || n.stop == nil) && tc.stop != nil {
			tc.stop()
		}
	}
}

// refusal is why the input d forwards now cannot reach it: its video
// transcoder was refused (nil otherwise).
// setTranscoded and setRecode store what their fields say and keep plain
// true to both. Called by the control goroutine (and pion's Bind on it).
func (d *downTrack) setTranscoded(m map[*broker.Track]transcoding) {
	d.transcoded.Store(&m)
	r := d.recode.Load() // nil only while newDown sets the track up
	d.plain.Store(len(m) == 0 && (r == nil || *r == ""))
}

func (d *downTrack) setRecode(codec string) {
	d.recode.Store(&codec)
	t := d.transcoded.Load()
	d.plain.Store(t != nil && len(*t) == 0 && codec == "")
}

func (d *downTrack) refusal() error {
	t := d.target.Load()
	if t == nil {
		return nil
	}
	return (*d.transcoded.Load())[t].err
}

// enqueue hands a packet of input from to the writer of d; it never
// blocks.
func (p *Peer) enqueue(d *downTrack, pk *media.Packet, from *broker.Track) {
	if p.inflight.Add(1) > int32(p.s.cfg.Queue) {
		p.inflight.Add(-1)
		d.dropped.Add(1)
		p.s.m.dropped.WithLabelValues("queue_full").Inc()
		pk.Release()
		return
	}
	select {
	case p.worker <- outPkt{d: d, p: pk, t: from, at: time.Now()}:
	default:
		p.inflight.Add(-1)
		d.dropped.Add(1)
		p.s.m.dropped.WithLabelValues("worker_full").Inc()
		pk.Release()
	}
}

// resync asks the control goroutine to compare the subscriber connection
// with the room.
func (p *Peer) resync() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// recvMedia is the session's view of a receiving link.
type recvMedia struct {
	p    *Peer
	link string
	room *broker.Room
}

func (m recvMedia) Member() string       { return m.p.member }
func (m recvMedia) Track() *broker.Track { return nil }
func (m recvMedia) Local() session.Local { return session.Local{} }
func (m recvMedia) Stats() session.LinkStats {
	return session.LinkStats{Dropped: map[string]uint64{}}
}

// Counts is Stats' packets (none: a subscriber's are its peer's) without
// its map, for the capacity governor's twice-a-second sum.
func (m recvMedia) Counts() (in, out, queueFull uint64) { return 0, 0, 0 }

// Close leaves the room; a receiving link closes when its member leaves or
// the session stops, and then the peer hangs up.
func (m recvMedia) Close() {
	m.room.Leave(m.link)
	m.p.Close()
}

// attachReceivers joins the member's receiving links (audio and video).
func (p *Peer) attachReceivers() error {
	for _, k := range []media.Kind{media.Audio, media.Video} {
		var r *broker.Room
		l, err := p.s.sessions.AttachLive(p.ctx, p.session, p.member, session.NewLiveLink{Type: session.LinkWebRTC, Kind: k},
			func(room *broker.Room, at session.Place) (session.Media, error) {
				r = room
				_, err := room.Join(broker.Member{ID: at.LinkID, Kind: k, Receives: true, Sink: subSink{p}, Group: at.Group,
					Owner: p.member, Layered: true, OnChange: p.resync})
				if err != nil {
					return nil, err
				}
				return recvMedia{p: p, link: at.LinkID, room: room}, nil
			})
		if err != nil {
			return err
		}
		p.recvLinks[k] = l.ID
		p.broom = r
	}
	return nil
}

// streamOf is the source a track belongs to.
func streamOf(t *broker.Track) string {
	if s := t.Info().Stream; s != "" {
		return s
	}
	return t.Publisher()
}

// memberOf is the session member who sends a track ("" for none).
func memberOf(t *broker.Track) string { return t.Owner() }

// syncSub makes the subscriber connection carry the tracks the member is
// subscribed to now, and renegotiates if that changed.
func (p *Peer) syncSub() {
	if p.broom == nil || p.mode == modeWHIP {
		return
	}
	want := map[string][]*broker.Track{}
	for _, link := range p.recvLinks {
		for _, t := range p.broom.Subscribed(link) {
			key := streamOf(t) + "/" + t.Kind().String()
			if p.mode == modeWHEP {
				key = t.Kind().String()
			}
			want[key] = append(want[key], t)
		}
	}
	changed := false
	for key, d := range p.downs {
		if _, ok := want[key]; !ok && p.mode == modeBrowser {
			_ = p.sub.RemoveTrack(d.sender)
			d.close()
			delete(p.downs, key)
			changed = true
		}
	}
	routes := map[*broker.Track]*downTrack{}
	for key, ts := range want {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Info().Layer < ts[j].Info().Layer })
		d := p.downs[key]
		if d == nil {
			if p.mode != modeBrowser {
				continue // a WHEP viewer's tracks are its offer's
			}
			var err error
			if d, err = p.addDown(key, ts[0]); err != nil {
				p.s.log.Debug("webrtc subscribe", "session", p.session, "member", p.member, "track", key, "err", err)
				continue
			}
			changed = true
		}
		d.inputs.Store(&ts)
		p.transcode(d, ts)
		for _, t := range ts {
			routes[t] = d
		}
		p.choose(d)
		p.transcodeVideo(d)
	}
	p.routes.Store(&routes)
	// The first sync tells the browser its tracks even when there are
	// none: the web app sends its camera once it has seen the others'
	// video, or at once when there is none (web/src/rtc.ts videoWait).
	if changed || (!p.toldTracks && p.mode == modeBrowser) {
		p.toldTracks = true
		p.sendTracks()
	}
	if changed {
		p.negotiate()
	}
}

// addDown adds a remote track to the subscriber connection.
func (p *Peer) addDown(key string, t *broker.Track) (*downTrack, error) {
	if p.sub == nil {
		direct := p.s.eng.direct()
		pc, err := p.s.eng.newPC(func(e ccEstimator) { p.est.Store(&e) }, direct, nil)
		if err != nil {
			return nil, err
		}
		p.sub, p.direct = pc, direct
		p.subPC.Store(pc)
		p.watch(pc)
	}
	info := t.Info()
	pt, havePT := t.PayloadType()
	codec, ok := codecFor(info.Codec, t.Kind() == media.Audio, pt, havePT)
	if !ok {
		return nil, fmt.Errorf("codec of %s not known yet", t.ID())
	}
	if _, g711 := transcode.Source(t); g711 && p.s.cfg.Transcode != nil {
		codec = codecOpus.RTPCodecCapability // browsers hear phones in Opus (see transcode)
	}
	src := info.Source
	if src == "" {
		src = "rtp"
	}
	stream := streamOf(t)
	d, err := newDown(p, p.sub, key, codec, TrackDesc{ID: stream + "-" + t.Kind().String(), Stream: stream,
		Member: memberOf(t), Kind: t.Kind().String(), Source: src}, stream)
	if err != nil {
		return nil, err
	}
	p.downs[key] = d
	return d, nil
}

// newDown adds a sending track of codec to pc and starts reading its RTCP.
func newDown(p *Peer, pc *webrtc.PeerConnection, key string, codec webrtc.RTPCodecCapability, desc TrackDesc, stream string) (*downTrack, error) {
	kind, _ := media.ParseKind(desc.Kind)
	d := &downTrack{p: p, key: key, kind: kind, clock: codec.ClockRate, desc: desc}
	d.setTranscoded(map[*broker.Track]transcoding{})
	d.setRecode("")
	local, err := newLocalTrack(codec, desc.ID, stream)
	if err != nil {
		return nil, err
	}
	if kind == media.Audio && p.direct != nil && pc == p.sub {
		local.direct = p.direct
	}
	if kind == media.Video && p.s.cfg.Video != nil {
		if _, ok := vtranscode.Canonical(codec.MimeType); ok {
			d.setRecode(codec.MimeType)
			d.vtarget = vtranscode.Target{Codec: codec.MimeType}
			local.instead = d.rebind
		}
	}
	sender, err := pc.AddTrack(local)
	if err != nil {
		return nil, err
	}
	d.local, d.sender = local, sender
	if kind == media.Video {
		d.hist = &history{}
	}
	go d.readRTCP()
	return d, nil
}

// rebind chooses the codec a video track carries when its receiver took
// none of its own (a browser without H.264 subscribed to an H.264 camera):
// the first VP8 or H.264 it took, in the size and rate its format
// parameters allow; the cameras then reach it through video transcoders.
// Called by pion as it binds the track (localTrack.Bind), on the control
// goroutine that applies the receiver's answer.
func (d *downTrack) rebind(negotiated []webrtc.RTPCodecParameters) (webrtc.RTPCodecCapability, bool) {
	for _, c := range negotiated {
		mime, ok := vtranscode.Canonical(c.MimeType)
		if !ok {
			continue
		}
		d.vtarget = vtranscode.FromSDP(mime, c.SDPFmtpLine, "")
		d.vtarget.Codec = c.MimeType
		m := c.MimeType
		d.setRecode(m)
		d.p.s.log.Info("webrtc video track rebound: the receiver takes another codec", "session", d.p.session,
			"member", d.p.member, "track", d.desc.ID, "codec", m)
		d.p.resync()
		return c.RTPCodecCapability, true
	}
	return webrtc.RTPCodecCapability{}, false
}

// close releases what the track holds once it is off the connection.
func (d *downTrack) close() {
	for _, tc := range *d.transcoded.Swap(&map[*broker.Track]transcoding{}) {
		if tc.stop != nil {
			tc.stop()
		}
	}
	if d.hist != nil {
		d.hist.close()
	}
}

func (p *Peer) sendTracks() {
	ts := make([]TrackDesc, 0, len(p.downs))
	for _, d := range p.downs {
		desc := d.desc
		if in := d.inputs.Load(); in != nil {
			desc.Layers = len(*in)
		}
		ts = append(ts, desc)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	p.send(Frame{Type: "tracks", Tracks: ts})
}

// negotiate offers the subscriber connection's current tracks, or notes
// that it must once the pending offer is answered.
func (p *Peer) negotiate() {
	if p.sub == nil {
		return
	}
	if p.subPending {
		p.subAgain = true
		return
	}
	offer, err := p.sub.CreateOffer(nil)
	if err != nil {
		p.s.log.Warn("webrtc offer", "session", p.session, "member", p.member, "err", err)
		return
	}
	sdp, err := p.localDescription(p.sub, offer)
	if err != nil {
		return
	}
	p.subPending = true
	p.send(Frame{Type: "offer", PC: "sub", SDP: sdp})
}

// subAnswer applies the browser's answer on the subscriber connection.
func (p *Peer) subAnswer(sdp string) error {
	if p.sub == nil || !p.subPending {
		return fmt.Errorf("no offer is waiting for an answer")
	}
	if err := p.sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
		return fmt.Errorf("answer: %v", err)
	}
	p.subPending = false
	// A renegotiation added tracks to a live connection; or the first
	// answer: a keyframe asked for now is in the history by the time ICE
	// and DTLS are done (replay).
	p.requestKeyframes()
	if p.subAgain {
		p.subAgain = false
		p.negotiate()
	}
	return nil
}

// setLayer fixes a remote track's simulcast layer (0: by estimate).
func (p *Peer) setLayer(track string, layer int) error {
	for _, d := range p.downs {
		if d.desc.ID == track {
			d.manual.Store(int32(layer))
			p.choose(d)
			return nil
		}
	}
	return fmt.Errorf("no remote track %q", track)
}

// work is one writer goroutine of the SFU: it forwards the packets of the
// subscribers sharded to it, in order per subscriber. A fixed pool (one per
// CPU) instead of a goroutine per subscriber: a packet fanned out to
// hundreds of subscribers wakes a few goroutines, not hundreds, and the
// scheduler's queueing no longer stretches the latency tail.
//
// A burst is what the queue holds when the writer wakes: its packets are
// written while the writer holds the socket, so they leave together in
// sendmmsg batches (engine.hold), and the delay of each is observed once
// the burst has gone out.
func (s *SFU) work(ch chan outPkt) {
	var queued []time.Time // the burst's packets' enqueue times
	for {
		var o outPkt
		select {
		case o = <-ch:
		case <-s.done:
			return
		}
		s.eng.hold()
		start := time.Now() // the burst's packets' send time, to a few hundred µs
		for {
			p := o.d.p
			if !p.closed.Load() {
				o.d.write(o.p, o.t, start)
				queued = append(queued, o.at)
			}
			p.inflight.Add(-1)
			o.p.Release()
			if len(queued) >= batchMax {
				break // bound the burst: later packets must not wait on it
			}
			select {
			case o = <-ch:
				continue
			default:
			}
			break
		}
		s.eng.release()
		now := time.Now()
		for _, at := range queued {
			s.m.delay.Observe(now.Sub(at).Seconds())
		}
		queued = queued[:0]
	}
}

// write forwards one packet of input t at now, switching inputs on a
// keyframe and keeping sequence numbers and timestamps continuous across
// switches.
func (d *downTrack) write(pk *media.Packet, t *broker.Track, now time.Time) {
	if err := d.pkt.Unmarshal(pk.Bytes()); err != nil {
		return
	}
	cur := d.cur.Load()
	if t != cur {
		if t != d.target.Load() {
			return
		}
		if d.kind == media.Video && cur != nil && !keyframe(d.local.mime(), d.pkt.Payload) {
			d.waitedKeyframe.Add(1)
			return
		}
		if d.started {
			d.seqOff = d.pkt.SequenceNumber - (d.lastSeq + 1)
			gap := uint32(max(1, now.Sub(d.lastAt).Seconds()*float64(d.clock)))
			d.tsOff = d.pkt.Timestamp - (d.lastTS + gap)
		}
		d.cur.Store(t)
		if cur != nil && d.kind == media.Video {
			d.p.s.m.switches.Inc()
			d.p.send(Frame{Type: "layer", Track: d.desc.ID, Layer: layerName(t.Info().Layer), Auto: d.manual.Load() == 0})
		}
	}
	seq := d.pkt.SequenceNumber - d.seqOff
	ts := d.pkt.Timestamp - d.tsOff
	inOrder := !d.started || int16(seq-d.lastSeq) > 0
	if inOrder {
		d.lastSeq, d.lastTS, d.lastAt = seq, ts, now
	}
	d.started = true
	// The publisher's extensions (its IDs, its TWCC numbers) mean nothing
	// on this connection; the interceptors add this connection's own.
	// Padding is not forwarded.
	d.hdr = rtp.Header{Version: 2, Marker: d.pkt.Marker, SequenceNumber: seq, Timestamp: ts,
		CSRC: d.pkt.CSRC, Extensions: d.hdr.Extensions[:0]}
	if d.hist != nil {
		d.hist.add(pk, d.pkt.Payload, seq, ts, d.pkt.Marker)
	}
	if err := d.local.write(&d.hdr, d.pkt.Payload); err == nil {
		d.forwarded.Add(1)
		d.p.s.m.forwarded.Inc()
		d.sent(len(d.pkt.Payload), ts, now, inOrder)
	}
}

// replay sends a subscriber whose connection just came up the packets
// from the newest keyframe on, if the history holds them and it is less
// than a second old: its first frame then shows at once, not after a
// keyframe request's round trip to the publisher and its encoder (the
// packets written before the connection was up went nowhere). It
// reports whether it sent any.
func (d *downTrack) replay() bool {
	mime := d.local.mime()
	if d.hist == nil || !(strings.EqualFold(mime, "video/VP8") || strings.EqualFold(mime, "video/H264")) {
		return false
	}
	ps := d.hist.sinceKeyframe(func(b []byte) bool { return keyframe(mime, b) }, d.clock)
	for _, e := range ps {
		h := rtp.Header{Version: 2, Marker: e.marker, SequenceNumber: e.seq, Timestamp: e.ts}
		if d.local.write(&h, e.payload) == nil {
			d.p.s.m.replayed.Inc()
			d.sent(len(e.payload), e.ts, time.Time{}, false)
		}
		e.pk.Release()
	}
	return len(ps) > 0
}

// resend answers a NACK from the history, at most 64 packets of it.
func (d *downTrack) resend(n *rtcp.TransportLayerNack) {
	if d.hist == nil {
		return
	}
	budget := 64
	for _, pair := range n.Nacks {
		pair.Range(func(seq uint16) bool {
			if budget == 0 {
				return false
			}
			budget--
			e, ok := d.hist.get(seq)
			if !ok {
				d.p.s.m.nack.WithLabelValues("missing").Inc()
				return true
			}
			h := rtp.Header{Version: 2, Marker: e.marker, SequenceNumber: e.seq, Timestamp: e.ts}
			if d.local.write(&h, e.payload) == nil {
				d.p.s.m.nack.WithLabelValues("resent").Inc()
				d.sent(len(e.payload), e.ts, time.Time{}, false)
			}
			e.pk.Release()
			return true
		})
	}
}

// readRTCP reads the subscriber's RTCP for this track: keyframe requests
// go upstream (throttled there), receiver reports feed quality.
func (d *downTrack) readRTCP() {
	for {
		pkts, _, err := d.sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, pk := range pkts {
			switch r := pk.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				d.p.s.m.pli.WithLabelValues("received").Inc()
				t := d.cur.Load()
				if t == nil {
					t = d.target.Load()
				}
				if t == nil {
					break
				}
				// A transcoded input's keyframe comes from its transcoder
				// (which asks the publisher and forces one out).
				if tc := (*d.transcoded.Load())[t]; tc.keyframe != nil {
					tc.keyframe()
				} else {
					t.RequestKeyframe()
				}
			case *rtcp.TransportLayerNack:
				d.resend(r)
			case *rtcp.ReceiverReport:
				for _, rr := range r.Reports {
					d.report(rr)
				}
			}
		}
	}
}

func (d *downTrack) report(rr rtcp.ReceptionReport) {
	setF64(&d.loss, float64(rr.FractionLost)/256)
	if d.clock > 0 {
		setF64(&d.jitter, float64(rr.Jitter)/float64(d.clock)*1000)
	}
	if rr.LastSenderReport != 0 {
		now := ntpMiddle(time.Now())
		rtt := now - rr.LastSenderReport - rr.Delay
		if rtt < 1<<20 { // under 16 s: not a wrap
			setF64(&d.rtt, float64(rtt)/65536*1000)
		}
	}
}

// ntpMiddle returns the middle 32 bits of the NTP time of t.
func ntpMiddle(t time.Time) uint32 { return uint32(ntpTime(t) >> 16) }

// keyframe reports whether an RTP payload starts a keyframe
// (media.Keyframe: VP8 and H.264; any other codec counts as one).
func keyframe(mime string, b []byte) bool { return media.Keyframe(mime, b) }
