package rtplink

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/udpmux"
)

// Config describes a link.
type Config struct {
	ID        string
	Kind      media.Kind
	Direction media.Direction
	// Remote is where the endpoint sends RTP from and receives it at.
	Remote netip.AddrPort
	// RemoteRTCP is the endpoint's RTCP address. Unset: Remote's port + 1,
	// or Remote itself when RTCPMux is set.
	RemoteRTCP netip.AddrPort
	RTCPMux    bool
	// Queue bounds the packets in flight to the endpoint.
	Queue int
	// Group is the session subgroup the endpoint is in ("" = main).
	Group string
	// Gated starts the endpoint's track with its floor gate closed.
	Gated bool
	// Consent, when not zero, makes the link send nothing to the endpoint
	// until it has received an RTP or RTCP packet from the endpoint's exact
	// address, and stop again when nothing has arrived for between Consent
	// and twice Consent: consent freshness in the spirit of RFC 7675 §5.1,
	// with the endpoint's own media standing in for STUN. It keeps a node
	// from being turned into a UDP amplifier towards an address that never
	// asked for media.
	Consent time.Duration
	// Owner is the session member the endpoint belongs to ("" for none):
	// it never receives media that member sends on another link.
	Owner string
	// From, when set, makes the endpoint receive only the tracks of that
	// session member (broker.Member.From). SendPT, when not zero, is the
	// payload type the endpoint takes the media it receives in (a phone's
	// offered one): packets sent to it are copies with that type.
	From   string
	SendPT uint8
	// OneStream makes the endpoint take every track it hears as one
	// stream (broker.Member.OneStream): one SSRC, numbers that run on
	// across a change of From, the new track from its keyframe.
	OneStream bool
	// Mixed: the endpoint hears a mixer's output (delivered to the link by
	// the mixer), not the room's tracks.
	Mixed bool
	// TelephoneEvent is the RFC 4733 payload type the endpoint sends
	// digits with (0: none). Its events go to OnDigit, taken before the
	// floor gate (a phone asks for the floor with them), and are not
	// forwarded.
	TelephoneEvent uint8
	OnDigit        func(digit byte)
	// Latch names the IPs an endpoint behind NAT may send from instead of
	// Remote (its signalling source, its SDP's address): the first RTP
	// or RTCP datagram from one of them within LatchWindow of Open, before
	// any from Remote, makes its source the endpoint's address (RTCP's
	// apart, unless muxed). A source once learnt is never replaced.
	Latch       []netip.Addr
	LatchWindow time.Duration
	// LatchPT, if set, narrows the latch to RTP of the payload types it
	// accepts: a phone's audio and video links latch on one IP (its NAT
	// maps the two streams to two ports), and each learns its own source
	// whichever sends first. Their RTCP, which payload types cannot tell
	// apart, is not latched then.
	LatchPT func(pt uint8) bool
	// Info describes what the endpoint sends (its codec, when named), for
	// the track's receivers (broker.Member.Info).
	Info broker.TrackInfo
	// Receive, if set, takes the room's packets for the endpoint in the
	// link's place: a converter (a video receiver of one codec) that hands
	// the link (Deliver) what the endpoint can take. OnChange, if set, is
	// told when the tracks the endpoint is subscribed to changed
	// (broker.Member.OnChange).
	Receive  broker.Sink
	OnChange func()
	// Now is the clock receiver reports and the sender reports sent to
	// the endpoint are timed by (default time.Now; quality.go).
	Now func() time.Time
	// Metrics, if set, take the endpoint's reports (shared by all links).
	Metrics *Metrics
}

// Sockets are the node's shared media sockets.
type Sockets struct {
	RTP, RTCP *udpmux.Socket
}

// Stats are a link's counters.
type Stats struct {
	PacketsIn, BytesIn uint64 // accepted from the endpoint (RTP)
	RTCPIn             uint64
	Out                udpmux.DestStats // RTP sent to the endpoint
	RTCPOut            udpmux.DestStats
	Dropped            map[string]uint64 // by reason
	// Quality is what the endpoint's receiver reports say (quality.go).
	Quality Quality
}

// Link is one plain RTP endpoint in a room.
type Link struct {
	cfg   Config
	socks Sockets
	room  *broker.Room
	track *broker.Track

	digitsMu sync.Mutex
	digits   media.DigitDetector

	// Where the endpoint is: Remote and RemoteRTCP, or the sources a
	// latch learnt (Config.Latch).
	dest, rtcpDest atomic.Pointer[udpmux.Dest]
	rtcpSock       *udpmux.Socket
	// End the latches still waiting (latch.go).
	unlatchRTP, unlatchRTCP atomic.Pointer[func()]

	// q keeps the endpoint's receiver reports and the SRs sent to it.
	q quality

	packetsIn, bytesIn, rtcpIn atomic.Uint64
	truncated, badVersion, dir atomic.Uint64

	// Consent (Config.Consent): heard counts RTP and RTCP from the
	// endpoint; consented is set by the first and cleared by checkConsent,
	// a timer that finds heard unchanged for one Consent period. lastHeard
	// belongs to that timer.
	heard     atomic.Uint64
	consented atomic.Bool
	noConsent atomic.Uint64
	consentT  atomic.Pointer[time.Timer]
	lastHeard uint64

	// open is set once the link holds its addresses on the sockets. Until
	// then, and after Close, the room's packets for it are not sent: an Open
	// that fails must not send to an address another link owns.
	open      atomic.Bool
	closeOnce sync.Once
}

// Open attaches an endpoint to room through the shared sockets.
func Open(cfg Config, socks Sockets, room *broker.Room) (*Link, error) {
	if !cfg.Direction.Valid() {
		return nil, fmt.Errorf("rtplink: invalid direction %q", cfg.Direction)
	}
	if !cfg.Remote.IsValid() || cfg.Remote.Port() == 0 {
		return nil, errors.New("rtplink: remote address needs an IP and a port")
	}
	if !cfg.RemoteRTCP.IsValid() {
		if cfg.RTCPMux {
			cfg.RemoteRTCP = cfg.Remote
		} else {
			if cfg.Remote.Port() == 65535 {
				return nil, errors.New("rtplink: remote RTP port 65535 leaves no port for RTCP")
			}
			cfg.RemoteRTCP = netip.AddrPortFrom(cfg.Remote.Addr(), cfg.Remote.Port()+1)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Link{cfg: cfg, socks: socks, room: room}
	l.q.clock, l.q.m = float64(cfg.Info.ClockRate), cfg.Metrics
	if l.q.clock == 0 {
		l.q.clock = 8000
		if cfg.Kind == media.Video {
			l.q.clock = 90000
		}
	}
	l.digits.PT = cfg.TelephoneEvent
	l.dest.Store(udpmux.NewDest(cfg.Remote, cfg.Queue))
	l.rtcpDest.Store(udpmux.NewDest(cfg.RemoteRTCP, cfg.Queue))
	l.rtcpSock = socks.RTCP
	if cfg.RTCPMux {
		l.rtcpSock = socks.RTP
	}

	// Join before registering: once registered, the socket's read goroutine
	// may hand the link a datagram at any time, and l.track must be set by
	// then (Register's lock orders the write before that read).
	m := broker.Member{ID: cfg.ID, Kind: cfg.Kind, Sends: cfg.Direction.Sends(), Receives: cfg.Direction.Receives() && !cfg.Mixed,
		Group: cfg.Group, Gated: cfg.Gated, Owner: cfg.Owner, From: cfg.From, OneStream: cfg.OneStream, Info: cfg.Info}
	if m.Receives {
		m.Sink, m.OnChange = l, cfg.OnChange
		if cfg.Receive != nil {
			m.Sink = cfg.Receive
		}
	}
	// Every endpoint takes RTCP: a sendonly one still needs the others'
	// receiver reports (RFC 3264 §5.1).
	m.RTCPSink = broker.SinkFunc(l.deliverRTCP)
	track, err := room.Join(m)
	if err != nil {
		return nil, err
	}
	l.track = track
	if err := socks.RTP.Register(cfg.Remote, l); err != nil {
		room.Leave(cfg.ID)
		return nil, err
	}
	if !cfg.RTCPMux {
		if err := socks.RTCP.Register(cfg.RemoteRTCP, rtcpHandler{l}); err != nil {
			socks.RTP.Unregister(cfg.Remote)
			room.Leave(cfg.ID)
			return nil, err
		}
	}
	l.open.Store(true)
	l.latch()
	if cfg.Consent > 0 {
		t := time.AfterFunc(time.Hour, l.checkConsent) // set before it can fire
		l.consentT.Store(t)
		t.Reset(cfg.Consent)
	}
	return l, nil
}

// hear records a valid RTP or RTCP packet from the endpoint: consent to
// receive (Config.Consent).
func (l *Link) hear() {
	if l.cfg.Consent <= 0 {
		return
	}
	l.heard.Add(1)
	if !l.consented.Load() {
		l.consented.Store(true)
	}
}

// checkConsent withdraws consent when nothing arrived for a period.
func (l *Link) checkConsent() {
	if !l.open.Load() {
		return
	}
	if n := l.heard.Load(); n == l.lastHeard {
		l.consented.Store(false)
	} else {
		l.lastHeard = n
	}
	if t := l.consentT.Load(); t != nil {
		t.Reset(l.cfg.Consent)
	}
}

// mayNotSend reports (and counts) a packet the endpoint has not consented
// to receive.
func (l *Link) mayNotSend() bool {
	if l.cfg.Consent > 0 && !l.consented.Load() {
		l.noConsent.Add(1)
		return true
	}
	return false
}

// Consented reports whether the endpoint may be sent to now: always for a
// link without Config.Consent.
func (l *Link) Consented() bool { return l.cfg.Consent <= 0 || l.consented.Load() }

// Config returns the link's configuration with defaults filled in.
func (l *Link) Config() Config { return l.cfg }

// Track returns the link's track, or nil for a receive-only endpoint.
func (l *Link) Track() *broker.Track { return l.track }

// HandleDatagram takes a datagram that arrived on the RTP socket from the
// endpoint.
func (l *Link) HandleDatagram(p *media.Packet, _ netip.AddrPort) {
	stopLatching(&l.unlatchRTP)
	switch media.Classify(p.Bytes(), l.cfg.RTCPMux) {
	case media.ClassRTP:
		if l.track == nil {
			l.hear() // a receive-only endpoint's RTP still says it is there
			l.dir.Add(1)
			p.Release()
			return
		}
		l.hear()
		l.packetsIn.Add(1)
		l.bytesIn.Add(uint64(p.Len()))
		if l.cfg.TelephoneEvent != 0 {
			l.digitsMu.Lock()
			isEv, d, ok := l.digits.Event(p.Bytes())
			l.digitsMu.Unlock()
			if isEv {
				if ok && l.cfg.OnDigit != nil {
					l.cfg.OnDigit(d)
				}
				p.Release()
				return
			}
		}
		l.track.Publish(p)
	case media.ClassRTCP:
		l.hear()
		l.rtcpIn.Add(1)
		l.q.received(p.Bytes(), l.cfg.Now())
		l.room.PublishRTCP(l.cfg.ID, l.cfg.Kind, p)
	case media.ClassTruncated:
		l.truncated.Add(1)
		p.Release()
	default:
		l.badVersion.Add(1)
		p.Release()
	}
}

type rtcpHandler struct{ l *Link }

// HandleDatagram takes a datagram from the endpoint's RTCP port.
func (h rtcpHandler) HandleDatagram(p *media.Packet, _ netip.AddrPort) {
	stopLatching(&h.l.unlatchRTCP)
	switch media.ClassifyRTCP(p.Bytes()) {
	case media.ClassRTCP:
		h.l.hear()
		h.l.rtcpIn.Add(1)
		h.l.q.received(p.Bytes(), h.l.cfg.Now())
		h.l.room.PublishRTCP(h.l.cfg.ID, h.l.cfg.Kind, p)
	case media.ClassTruncated:
		h.l.truncated.Add(1)
		p.Release()
	default:
		h.l.badVersion.Add(1)
		p.Release()
	}
}

// Deliver sends a packet of another member's track to the endpoint.
func (l *Link) Deliver(p *media.Packet, _ *broker.Track) {
	if !l.open.Load() || l.mayNotSend() {
		p.Release()
		return
	}
	if pt := l.cfg.SendPT; pt != 0 && p.Len() >= 12 && p.Bytes()[1]&0x7f != pt {
		// Packets are shared among receivers: the endpoint's own type goes
		// on a copy.
		c := media.NewPacket()
		c.SetLen(copy(c.Buffer(), p.Bytes()))
		c.Kind, c.RTCP = p.Kind, p.RTCP
		p.Release()
		b := c.Bytes()
		b[1] = b[1]&0x80 | pt&0x7f
		p = c
	}
	l.socks.RTP.Send(p, l.dest.Load())
}

func (l *Link) deliverRTCP(p *media.Packet, _ *broker.Track) {
	if !l.open.Load() || l.mayNotSend() {
		p.Release()
		return
	}
	l.q.noteSent(p.Bytes(), l.cfg.Now())
	l.rtcpSock.Send(p, l.rtcpDest.Load())
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	return Stats{
		PacketsIn: l.packetsIn.Load(),
		BytesIn:   l.bytesIn.Load(),
		RTCPIn:    l.rtcpIn.Load(),
		Out:       l.dest.Load().Stats(),
		RTCPOut:   l.rtcpDest.Load().Stats(),
		Dropped: map[string]uint64{
			media.DropTruncated:  l.truncated.Load(),
			media.DropBadVersion: l.badVersion.Load(),
			media.DropDirection:  l.dir.Load(),
			media.DropConsent:    l.noConsent.Load(),
		},
		Quality: l.q.snapshot(),
	}
}

// Counts returns what Stats does of the packets taken and sent and of
// those dropped at a full queue, without its maps: the capacity governor
// sums them over every link twice a second.
func (l *Link) Counts() (in, out, queueDrops uint64) {
	d, r := l.dest.Load().Stats(), l.rtcpDest.Load().Stats()
	return l.packetsIn.Load(), d.Packets, d.Drops + r.Drops
}

func (l *Link) unregister() {
	stopLatching(&l.unlatchRTP)
	stopLatching(&l.unlatchRTCP)
	l.socks.RTP.Unregister(l.dest.Load().Addr())
	if !l.cfg.RTCPMux {
		l.socks.RTCP.Unregister(l.rtcpDest.Load().Addr())
	}
}

// Close detaches the endpoint. Packets already queued for it are still sent;
// packets the room hands it from now on are dropped.
func (l *Link) Close() {
	l.closeOnce.Do(func() {
		l.open.Store(false)
		if t := l.consentT.Load(); t != nil {
			t.Stop()
		}
		l.unregister()
		l.room.Leave(l.cfg.ID)
	})
}
