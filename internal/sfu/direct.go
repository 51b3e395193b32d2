package sfu

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"
)

// directOut is a subscriber connection's direct path: the writer
// encrypts each packet with the connection's own SRTP keys (dtlsKeys) and
// queues it on the single UDP port's socket (batchConn) for the
// connection's selected ICE pair, instead of handing it through pion's
// SRTP session's stream lookup, the mux endpoint, the ICE connection and
// the UDP mux. Those layers touch a dozen structures of the subscriber's
// for every packet; with a thousand subscribers each is a cache miss, and
// together they cost more than the kernel's send (profiles in
// ARCHITECTURE.md).
//
// Audio goes direct from the track (localTrack.write): an audio packet on
// pion's chain meets no interceptor that does anything. Video passes
// pion's interceptors first, the bandwidth estimator's (transport-wide
// sequence numbers, GCC's record of each packet sent), which the
// estimate that picks simulcast layers needs, and then goes direct at the
// bottom of the chain (directVideo), where pion's SRTP writer would be.
// NACK answers (downTrack.resend) take the same way as the packets they
// repeat.
//
// The path opens once the connection is connected, the node was the DTLS
// server (so dtlsKeys knows the keys), and the selected pair is UDP on the
// single port; it follows the selected pair as ICE changes it. Before,
// and whenever the pair is not such, packets take pion's path. A track's
// SRTP rollover counter is kept by whichever context encrypts it: a track
// that went direct and later had to fall back to pion's path (the pair
// moved to ICE-TCP, which a browser picks only when UDP fails) after 65,536
// packets would be undecodable; the fallback is for the first packets of
// a connection, not for a track that already went direct.
type directOut struct {
	keys    *dtlsKeys
	conn    *batchConn
	to      atomic.Pointer[netip.AddrPort] // the selected pair's remote; nil: use pion's path
	started atomic.Bool

	mu    sync.Mutex // guards ctx and the buffers
	ctx   *srtp.Context
	plain [maxDatagram]byte
	out   [maxDatagram]byte
}

// start opens the path on a connected connection, and follows its
// selected pair from now on. Called once, on the connection's Connected.
func (x *directOut) start(pc *webrtc.PeerConnection) bool {
	ctx, err := x.keys.localContext()
	if err != nil {
		return false
	}
	x.mu.Lock()
	x.ctx = ctx
	x.mu.Unlock()
	ice := pc.SCTP().Transport().ICETransport()
	ice.OnSelectedCandidatePairChange(x.follow)
	pair, err := ice.GetSelectedCandidatePair()
	if err != nil {
		return false
	}
	x.follow(pair)
	return x.to.Load() != nil
}

// follow points the path at a selected pair if it is UDP to an IP
// address (not a host name), and closes it otherwise.
func (x *directOut) follow(pair *webrtc.ICECandidatePair) {
	if pair == nil || pair.Remote == nil || pair.Remote.Protocol != webrtc.ICEProtocolUDP ||
		pair.Local == nil || pair.Local.Protocol != webrtc.ICEProtocolUDP {
		x.to.Store(nil)
		return
	}
	a, err := netip.ParseAddr(pair.Remote.Address)
	if err != nil || !a.Unmap().Is4() {
		x.to.Store(nil)
		return
	}
	to := netip.AddrPortFrom(a.Unmap(), pair.Remote.Port)
	x.to.Store(&to)
}

// write sends one packet with header h (SSRC and payload type set) the
// direct way and counts it in sent; false if the path is not open, and
// the caller then sends it through pion.
func (x *directOut) write(h *rtp.Header, payload []byte, sent *atomic.Uint64) bool {
	to := x.to.Load()
	if to == nil {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ctx == nil {
		return false
	}
	n := h.MarshalSize()
	if n+len(payload)+srtpOverhead > len(x.out) {
		return false
	}
	if _, err := h.MarshalTo(x.plain[:n]); err != nil {
		return false
	}
	copy(x.plain[n:], payload)
	out, err := x.ctx.EncryptRTP(x.out[:0], x.plain[:n+len(payload)], h)
	if err != nil {
		return false
	}
	_, _ = x.conn.WriteToAddrPort(out, *to)
	sent.Add(1)
	return true
}

// directVideo is the interceptor at the bottom of a subscriber
// connection's chain (registered first, so it wraps pion's SRTP writer):
// once the direct path is open it sends what the interceptors above
// wrote the direct way, else hands it to pion's writer.
type directVideo struct{ x *directOut }

// NewInterceptor implements interceptor.Factory.
func (f directVideo) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &directWriter{x: f.x}, nil
}

type directWriter struct {
	interceptor.NoOp
	x *directOut
}

// BindLocalStream sends the stream's packets the direct way when it can.
func (d *directWriter) BindLocalStream(_ *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if d.x.write(h, payload, &d.x.conn.directVideo) {
			return h.MarshalSize() + len(payload), nil
		}
		return w.Write(h, payload, a)
	})
}

// startDirect opens the subscriber connection's direct path, if it has
// one, once: a new SRTP context later would begin the rollover count
// again.
func (p *Peer) startDirect(pc *webrtc.PeerConnection) {
	x := p.direct
	if x == nil || x.started.Swap(true) {
		return
	}
	ok := x.start(pc)
	if !ok {
		p.s.log.Debug("webrtc direct path not open: pion's sends the media", "session", p.session, "member", p.member)
	}
}

// srtpOverhead is the most SRTP adds to a packet: a 16-byte GCM tag (an
// HMAC-SHA1-80 tag is 10).
const srtpOverhead = 16
