package sfu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/media"
)

// Peer is one member's WebRTC endpoint: a browser (both connections), a
// WHIP publisher (publisher connection only) or a WHEP viewer (subscriber
// connection only, answering the viewer's offer).
type Peer struct {
	s *SFU
	// Read for every packet sent to the peer (subSink.Deliver, enqueue),
	// so kept beside s.
	//
	// routes maps a subscribed broker track to its downTrack; the sinks
	// read it without a lock.
	routes   atomic.Pointer[map[*broker.Track]*downTrack]
	worker   chan outPkt  // the SFU writer this peer's packets go through
	inflight atomic.Int32 // packets queued for it there (at most Config.Queue)
	closed   atomic.Bool  // Close was called: ctx.Err() without its lock

	session string
	member  string
	mode    mode
	room    *room

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}

	// out carries frames to the browser's socket; full means a client
	// that does not read, which is hung up.
	out chan Frame
	// ctl serializes everything that touches the peer connections.
	ctl  chan func()
	kick chan struct{} // the subscriptions changed: resync

	// Owned by the control goroutine.
	pub, sub   *webrtc.PeerConnection
	direct     *directOut        // sub's direct path for audio, nil for none (set with sub)
	din        *directPub        // pub's direct path for audio, nil for none (set with pub)
	sources    map[string]string // publisher mid -> source
	ups        map[string]*upTrack
	downs      map[string]*downTrack // by stream and kind
	recvLinks  [2]string             // the receiving live links, by kind
	broom      *broker.Room          // the room they are in
	pin        string                // a WHEP viewer's chosen member (set before it starts)
	onClose    func()                // run after teardown (set before it starts)
	subPending bool                  // an offer on sub awaits its answer
	subAgain   bool                  // and the subscriptions changed since
	toldTracks bool                  // the browser has had a tracks frame (the first, even empty, follows the welcome)
	offers     []time.Time           // recent publisher offers (flood cap)
	held       int                   // peer connections counted against MaxPeers

	est    atomic.Pointer[cc.BandwidthEstimator]
	pubPC  atomic.Pointer[webrtc.PeerConnection] // p.pub, for other goroutines
	upList atomic.Pointer[[]*upTrack]            // p.ups, for other goroutines
	subPC  atomic.Pointer[webrtc.PeerConnection] // p.sub, for other goroutines

	muted       [2]atomic.Bool
	convMu      sync.Mutex   // guards conv
	conv        bool         // a conversation data channel is open (datachan.go)
	refusedDCs  atomic.Int32 // data channels refused so far
	qualitySent bool         // the room's tick goroutine's: a full report went out
	ownQuality  Quality      // the tick goroutine's: the member's own report its browser holds
}

type mode int

const (
	modeBrowser mode = iota
	modeWHIP
	modeWHEP
)

type outPkt struct {
	d  *downTrack
	p  *media.Packet
	t  *broker.Track
	at time.Time // queued
}

func (s *SFU) newPeer(sessionID, memberID string, m mode) (*Peer, error) {
	// One connection now (a browser's subscriber one, or the WHIP or WHEP
	// one); a browser's publisher connection counts when it is made.
	const n = 1
	if err := s.admit(sessionID, memberID, m); err != nil {
		return nil, err
	}
	if err := s.takePC(n); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Peer{s: s, session: sessionID, member: memberID, mode: m, ctx: ctx, cancel: cancel, done: make(chan struct{}), held: n,
		out: make(chan Frame, 64), ctl: make(chan func(), 16), kick: make(chan struct{}, 1),
		sources: map[string]string{}, ups: map[string]*upTrack{}, downs: map[string]*downTrack{},
		worker: s.workers[int(s.nextWorker.Add(1))%len(s.workers)]}
	p.routes.Store(&map[*broker.Track]*downTrack{})
	if err := s.register(p); err != nil {
		s.givePC(n)
		cancel()
		return nil, err
	}
	s.m.peers.Inc()
	go p.control()
	return p, nil
}

// Done is closed when the peer has hung up.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Member returns the member the peer belongs to.
func (p *Peer) Member() string { return p.member }

// Close hangs up: both connections, every live link.
func (p *Peer) Close() {
	// The control goroutine sees the context end and tears down.
	p.once.Do(func() {
		p.closed.Store(true)
		p.cancel()
	})
}

// do runs f on the control goroutine and waits for it.
func (p *Peer) do(f func() error) error {
	errc := make(chan error, 1)
	select {
	case p.ctl <- func() { errc <- f() }:
	case <-p.ctx.Done():
		return ErrClosed
	}
	select {
	case err := <-errc:
		return err
	case <-p.ctx.Done():
		return ErrClosed
	}
}

// control owns the peer connections until the peer closes.
func (p *Peer) control() {
	defer p.teardown()
	for {
		select {
		case f := <-p.ctl:
			f()
		case <-p.kick:
			p.syncSub()
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Peer) teardown() {
	for id := range p.ups {
		p.s.sessions.DetachLive(p.session, id)
	}
	for _, id := range p.recvLinks {
		if id != "" {
			p.s.sessions.DetachLive(p.session, id)
		}
	}
	if p.din != nil {
		p.din.close()
	}
	for _, pc := range []*webrtc.PeerConnection{p.pub, p.sub} {
		if pc != nil {
			_ = pc.Close()
		}
	}
	for _, d := range p.downs {
		d.close()
	}
	p.s.givePC(p.held)
	p.s.unregister(p)
	p.s.m.peers.Dec()
	close(p.done)
	if p.onClose != nil {
		go p.onClose()
	}
}

// send queues a frame for the browser; a browser that does not read its
// frames is hung up.
func (p *Peer) send(f Frame) {
	if p.mode != modeBrowser {
		return
	}
	select {
	case p.out <- f:
	default:
		p.s.m.refused.WithLabelValues("slow_reader").Inc()
		p.Close()
	}
}

// sendRaw queues a frame already marshalled (one for many peers).
func (p *Peer) sendRaw(b []byte) { p.send(Frame{raw: b}) }

// Out is the frames to write to the browser's socket.
func (p *Peer) Out() <-chan Frame { return p.out }

func (p *Peer) sendError(code, msg string) {
	p.s.m.errors.WithLabelValues(code).Inc()
	p.send(Frame{Type: "error", Code: code, Message: msg})
}

// Handle acts on one frame from the browser. Bad frames get an error frame
// and change nothing.
func (p *Peer) Handle(raw []byte) {
	f, err := Decode(raw)
	if err != nil {
		p.sendError("bad_frame", err.Error())
		return
	}
	switch f.Type {
	case "offer":
		if !p.allowOffer() {
			p.sendError("rate_limited", "too many offers: at most 10 in 10 s")
			return
		}
		err = p.do(func() error {
			ans, err := p.publish(f.SDP, f.Sources)
			if err != nil {
				return err
			}
			p.send(Frame{Type: "answer", PC: "pub", SDP: ans})
			return nil
		})
		switch {
		case errors.Is(err, ErrLimit):
			p.sendError("limit", err.Error())
		case err != nil && !errors.Is(err, ErrClosed):
			p.sendError("invalid_sdp", err.Error())
		}
	case "answer":
		err = p.do(func() error { return p.subAnswer(f.SDP) })
		if err != nil && !errors.Is(err, ErrClosed) {
			p.sendError("invalid_sdp", err.Error())
		}
	case "candidate":
		err = p.do(func() error { return p.addCandidate(f.PC, f.Candidate) })
		if err != nil && !errors.Is(err, ErrClosed) {
			p.sendError("bad_candidate", err.Error())
		}
	case "layer":
		l, _ := parseLayer(f.Layer)
		err = p.do(func() error { return p.setLayer(f.Track, l) })
		if err != nil && !errors.Is(err, ErrClosed) {
			p.sendError("unknown_track", err.Error())
		}
	case "mute":
		k, _ := media.ParseKind(f.Kind)
		if p.muted[k].Swap(*f.Muted) != *f.Muted {
			p.s.sessions.Announce(p.session, event.MediaMuted, map[string]any{"member": p.member, "kind": f.Kind, "muted": *f.Muted})
		}
	case "leave":
		p.Close()
	}
}

// allowOffer caps publisher offers at 10 in any 10 s.
func (p *Peer) allowOffer() bool {
	now := time.Now()
	keep := p.offers[:0]
	for _, t := range p.offers {
		if now.Sub(t) < 10*time.Second {
			keep = append(keep, t)
		}
	}
	p.offers = keep
	if len(p.offers) >= 10 {
		return false
	}
	p.offers = append(p.offers, now)
	return true
}

func (p *Peer) addCandidate(pc string, c *Candidate) error {
	target := p.pub
	if pc == "sub" {
		target = p.sub
	}
	if target == nil || target.RemoteDescription() == nil {
		return nil // before the description: nothing to add it to (ICE-lite learns the address from checks)
	}
	return target.AddICECandidate(webrtc.ICECandidateInit{Candidate: c.Candidate, SDPMid: c.SDPMid, SDPMLineIndex: c.SDPMLineIndex})
}

// watch hangs the peer up when a connection fails or closes, and hands
// the data channels its client opens to onDataChannel.
// When the subscriber connection is up (DTLS done, SRTP keys in place),
// every video it carries starts from its newest keyframe, replayed from
// the history, or gets a keyframe request: what was written before went
// nowhere.
func (p *Peer) watch(pc *webrtc.PeerConnection) {
	pc.OnDataChannel(p.onDataChannel)
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		switch st {
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			p.Close()
		case webrtc.PeerConnectionStateConnected:
			if pc == p.subPC.Load() {
				p.replayOrRequest()
				p.startDirect(pc)
			}
		}
	})
}

// replayOrRequest starts every video of a subscriber connection that
// just came up: from the newest keyframe in its history (downTrack.replay),
// else by asking its publisher for one.
func (p *Peer) replayOrRequest() {
	for _, d := range p.downTracks() {
		if d.kind != media.Video || d.replay() {
			continue
		}
		if t := d.target.Load(); t != nil {
			t.RequestKeyframe()
		}
	}
}

// requestKeyframes asks the publishers of every video the subscriber
// connection forwards for a keyframe (throttled at the publisher).
func (p *Peer) requestKeyframes() {
	for _, d := range p.downTracks() {
		if d.kind != media.Video {
			continue
		}
		if t := d.target.Load(); t != nil {
			t.RequestKeyframe()
		}
	}
}

// answerWait sets the local description and waits for ICE gathering (host
// candidates only: quick), so the SDP carries the candidates.
func (p *Peer) localDescription(pc *webrtc.PeerConnection, d webrtc.SessionDescription) (string, error) {
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(d); err != nil {
		return "", err
	}
	select {
	case <-gathered:
	case <-time.After(5 * time.Second):
		return "", fmt.Errorf("ICE gathering did not finish")
	case <-p.ctx.Done():
		return "", ErrClosed
	}
	return pc.LocalDescription().SDP, nil
}
