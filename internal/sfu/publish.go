package sfu

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/session"
)

// upTrack is one track (one simulcast layer) a peer publishes.
type upTrack struct {
	p      *Peer
	link   string
	kind   media.Kind
	track  *broker.Track
	remote *webrtc.TrackRemote
	room   *broker.Room
	source string
	layer  int

	pli      keyframeThrottle
	levelExt uint8        // RFC 6464 extension ID, 0 if not negotiated
	level    atomic.Int32 // smoothed audio level, -dBov * 100 (0 loudest)
	packets  atomic.Uint64
	bytes    atomic.Uint64
	closed   atomic.Bool

	mu    sync.Mutex // guards rx and publishing: pion's read loop and the direct path may both take packets
	rx    recvStats
	clock uint32 // the codec's clock rate, for jitter
}

// pubMedia is the session's view of an upTrack (session.Media).
type pubMedia struct{ u *upTrack }

func (m pubMedia) Member() string       { return m.u.p.member }
func (m pubMedia) Track() *broker.Track { return m.u.track }
func (m pubMedia) Local() session.Local { return session.Local{} }
func (m pubMedia) Stats() session.LinkStats {
	return session.LinkStats{PacketsIn: m.u.packets.Load(), BytesIn: m.u.bytes.Load(), Dropped: map[string]uint64{}}
}
func (m pubMedia) Close() { m.u.closed.Store(true); m.u.room.Leave(m.u.link) }

// Counts is Stats' packets without its map: the capacity governor asks
// every link twice a second (session.Service.Counts), and a thousand
// publishers' maps were about 8 % of what a node at 1,000 streams allocated.
func (m pubMedia) Counts() (in, out, queueFull uint64) { return m.u.packets.Load(), 0, 0 }

// publish applies a publisher offer and returns the answer; it runs on the
// control goroutine.
func (p *Peer) publish(offer string, sources map[string]string) (string, error) {
	if p.mode == modeWHEP {
		return "", errors.New("a WHEP viewer does not publish")
	}
	if p.pub == nil {
		if p.mode == modeBrowser {
			if err := p.s.takePC(1); err != nil {
				return "", err
			}
			p.held++
		}
		var din *directPub
		if !strings.Contains(offer, "a=setup:passive") {
			// The node answers as the DTLS server (the direct path needs
			// its keys): not to an offerer that insists on being it.
			din = p.s.eng.directIn()
		}
		pc, err := p.s.eng.newPC(nil, nil, din)
		if err != nil {
			return "", err
		}
		p.pub, p.din = pc, din
		p.pubPC.Store(pc)
		p.watch(pc)
		pc.OnTrack(func(t *webrtc.TrackRemote, r *webrtc.RTPReceiver) { p.onTrack(t, r) })
	}
	for mid, src := range sources {
		p.sources[mid] = src
	}
	if err := p.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		p.rollback()
		return "", fmt.Errorf("offer: %v", err)
	}
	if n := countRecv(p.pub); n > p.s.cfg.MaxTracks {
		p.rollback()
		return "", fmt.Errorf("at most %d published tracks (webrtc.max_tracks), the offer has %d", p.s.cfg.MaxTracks, n)
	}
	ans, err := p.pub.CreateAnswer(nil)
	if err != nil {
		p.rollback()
		return "", fmt.Errorf("answer: %v", err)
	}
	return p.localDescription(p.pub, ans)
}

// rollback returns the publisher connection to its last stable state after
// an offer it could not take, so the next offer starts clean.
func (p *Peer) rollback() {
	if p.pub.SignalingState() == webrtc.SignalingStateHaveRemoteOffer {
		_ = p.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeRollback})
	}
}

func countRecv(pc *webrtc.PeerConnection) int {
	n := 0
	for _, t := range pc.GetTransceivers() {
		if t.Direction() == webrtc.RTPTransceiverDirectionRecvonly || t.Direction() == webrtc.RTPTransceiverDirectionSendrecv {
			n++
		}
	}
	return n
}

// layerOf maps a simulcast RID to a layer 1..3 among the RIDs the
// transceiver declares (l/m/h or q/h/f); 0 without simulcast.
func layerOf(rid string, all []string) (layer int, primary bool) {
	if rid == "" || len(all) <= 1 {
		return 0, true
	}
	order := map[string]int{"l": 1, "m": 2, "h": 3}
	for _, r := range all {
		if r == "f" || r == "q" {
			order = map[string]int{"q": 1, "h": 2, "f": 3}
		}
	}
	known := true
	for _, r := range all {
		if order[r] == 0 {
			known = false
		}
	}
	if !known { // unknown names: their order in the SDP
		sorted := append([]string(nil), all...)
		sort.Strings(sorted)
		order = map[string]int{}
		for i, r := range sorted {
			order[r] = i + 1
		}
	}
	top := 0
	for _, r := range all {
		top = max(top, order[r])
	}
	return order[rid], order[rid] == top
}

// onTrack attaches a track the publisher started sending (one call per
// simulcast layer) and reads it until it ends.
func (p *Peer) onTrack(t *webrtc.TrackRemote, r *webrtc.RTPReceiver) {
	kind := media.Audio
	src := "microphone"
	if t.Kind() == webrtc.RTPCodecTypeVideo {
		kind, src = media.Video, "camera"
	}
	var mid string
	if tr := r.RTPTransceiver(); tr != nil {
		mid = tr.Mid()
	}
	var rids []string
	for _, x := range r.Tracks() {
		if x.RID() != "" {
			rids = append(rids, x.RID())
		}
	}
	err := p.do(func() error {
		if s := p.sources[mid]; s != "" {
			src = s
		}
		return nil
	})
	if err != nil {
		return
	}
	layer, primary := layerOf(t.RID(), rids)
	u := &upTrack{p: p, kind: kind, remote: t, source: src, layer: layer, clock: t.Codec().ClockRate}
	for _, h := range r.GetParameters().HeaderExtensions {
		if h.URI == audioLevelURI {
			u.levelExt = uint8(h.ID)
		}
	}
	u.level.Store(12700)
	codec := t.Codec()
	info := broker.TrackInfo{Codec: codec.MimeType, ClockRate: codec.ClockRate, Channels: codec.Channels, Fmtp: codec.SDPFmtpLine,
		Source: src, Stream: streamFor(p.member, src), Layer: layer, Primary: primary}
	link, err := p.s.sessions.AttachLive(p.ctx, p.session, p.member, session.NewLiveLink{Type: session.LinkWebRTC, Kind: kind, Sends: true, Source: src},
		func(room *broker.Room, at session.Place) (session.Media, error) {
			u.link, u.room = at.LinkID, room
			tr, err := room.Join(broker.Member{ID: at.LinkID, Kind: kind, Sends: true, Group: at.Group, Gated: at.Gated,
				Owner: p.member, Info: info, Keyframe: u.requestKeyframe})
			if err != nil {
				return nil, err
			}
			u.track = tr
			return pubMedia{u}, nil
		})
	if err != nil {
		p.s.log.Info("webrtc track refused", "session", p.session, "member", p.member, "err", err)
		p.sendError("track_refused", err.Error())
		return
	}
	_ = p.do(func() error { p.ups[link.ID] = u; p.listUps(); return nil })
	p.s.m.tracks.WithLabelValues("published").Inc()
	if kind == media.Audio && p.room != nil {
		p.room.speakers.add(u)
	}
	if x := p.din; x != nil {
		if x.start(r.Transport().ICETransport()) {
			x.add(u)
			defer x.remove(u)
		} else {
			p.s.log.Debug("webrtc direct path not open: pion's receives the audio", "session", p.session, "member", p.member)
		}
	}
	u.read()
	if p.room != nil {
		p.room.speakers.remove(u)
	}
	p.s.m.tracks.WithLabelValues("published").Dec()
	p.s.sessions.DetachLive(p.session, link.ID)
	_ = p.do(func() error { delete(p.ups, link.ID); p.listUps(); return nil })
}

// read publishes the track's packets until it ends or its link closes.
// Once the track goes direct (directIn), pion's chain delivers none (or
// the few it still holds): the port's reader calls take instead.
func (u *upTrack) read() {
	for !u.closed.Load() {
		pk := media.NewPacket()
		n, _, err := u.remote.Read(pk.Buffer())
		if err != nil {
			pk.Release()
			return
		}
		pk.SetLen(n)
		u.take(pk)
	}
}

// take counts a packet of the track (sequence, loss, jitter, level) and
// publishes it; from pion's read loop, or from the single port's reader
// once the track went direct.
func (u *upTrack) take(pk *media.Packet) {
	b := pk.Bytes()
	n := len(b)
	if n < 12 {
		pk.Release()
		return
	}
	seq := uint16(b[2])<<8 | uint16(b[3])
	ts := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	u.packets.Add(1)
	u.bytes.Add(uint64(n))
	// Under mu, as one goroutine's: the broker's subscribers take a
	// track's packets one at a time, while the track goes direct too.
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rx.add(seq, ts, time.Now(), u.clock)
	if u.levelExt != 0 {
		if lv, ok := audioLevel(b, u.levelExt); ok {
			old := u.level.Load()
			u.level.Store(old + (int32(lv)*100-old)/4)
		}
	}
	u.track.Publish(pk)
}

// pliEvery is the least time between two keyframe requests to one
// publisher track.
const pliEvery = 300 * time.Millisecond

// requestKeyframe sends the publisher a PLI, at most one per pliEvery
// (keyframeThrottle): many subscribers asking at once cost the publisher
// one keyframe, and none of them is left without one.
func (u *upTrack) requestKeyframe() {
	if !u.pli.ask(func() {
		if !u.closed.Load() && !u.p.closed.Load() {
			u.requestKeyframe()
		}
	}) {
		u.p.s.m.pli.WithLabelValues("throttled").Inc()
		return
	}
	pc := u.p.pubPC.Load()
	if pc == nil {
		return
	}
	u.p.s.m.pli.WithLabelValues("sent").Inc()
	_ = pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(u.remote.SSRC())}})
}

// keyframeThrottle lets one keyframe request through per pliEvery. A
// request inside the window is not dropped but made again when the
// window ends (once for all that came in it): the keyframe the request
// before brought may have gone by before its asker could take it (a
// subscriber not yet connected, an HLS feed that switched to this camera
// since), and a browser's camera sends keyframes only when asked.
type keyframeThrottle struct {
	last  atomic.Int64 // unix nanos of the last request let through
	later atomic.Bool  // again is due when the window ends
}

// ask reports whether a request may go now; if not, again runs once the
// window has ended, unless an earlier refused ask arranged it already.
func (k *keyframeThrottle) ask(again func()) bool {
	now := time.Now().UnixNano()
	last := k.last.Load()
	if wait := int64(pliEvery) - (now - last); wait > 0 {
		if k.later.CompareAndSwap(false, true) {
			time.AfterFunc(time.Duration(wait), func() {
				k.later.Store(false)
				again()
			})
		}
		return false
	}
	return k.last.CompareAndSwap(last, now) // false: another caller's goes now
}

// windowLoss is the fraction of packets lost since the last call (the
// tick goroutine's).
func (u *upTrack) windowLoss() float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.rx.windowLoss()
}

// rocFor is the SRTP rollover count of the track's packet seq, from the
// packets taken so far (the direct path's first packet).
func (u *upTrack) rocFor(seq uint16) uint32 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.rx.rocFor(seq)
}

// audioLevel finds the RFC 6464 level (0..127, -dBov) in an RTP packet's
// one-byte header extension with the given ID.
func audioLevel(b []byte, id uint8) (uint8, bool) {
	if len(b) < 12 || b[0]&0x10 == 0 {
		return 0, false
	}
	off := 12 + 4*int(b[0]&0x0f)
	if len(b) < off+4 || b[off] != 0xbe || b[off+1] != 0xde {
		return 0, false
	}
	n := 4 * (int(b[off+2])<<8 | int(b[off+3]))
	off += 4
	end := off + n
	if end > len(b) {
		return 0, false
	}
	for off < end {
		h := b[off]
		if h == 0 {
			off++
			continue
		}
		eid, l := h>>4, int(h&0x0f)+1
		if eid == 15 {
			break
		}
		if off+1+l > end {
			break
		}
		if eid == id {
			return b[off+1] & 0x7f, true
		}
		off += 1 + l
	}
	return 0, false
}

// listUps publishes the list of upTracks for other goroutines.
func (p *Peer) listUps() {
	l := make([]*upTrack, 0, len(p.ups))
	for _, u := range p.ups {
		l = append(l, u)
	}
	p.upList.Store(&l)
}

func (p *Peer) upTracks() []*upTrack {
	if l := p.upList.Load(); l != nil {
		return *l
	}
	return nil
}

func (p *Peer) downTracks() []*downTrack {
	seen := map[*downTrack]bool{}
	var l []*downTrack
	for _, d := range *p.routes.Load() {
		if !seen[d] {
			seen[d] = true
			l = append(l, d)
		}
	}
	return l
}

// streamFor is the media stream a source of a member's goes out in: the
// microphone and the camera share the member's, a screen has its own.
func streamFor(member, source string) string {
	if source == "screen" {
		return member + "-screen"
	}
	return member
}
