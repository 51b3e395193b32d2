package sfu

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/media"
)

// directIn is the single UDP port's direct path for publishers' media,
// the other way from directOut: the port's reader (pion's UDP mux reads
// through batchConn) takes each SRTP packet of a published track as it
// leaves the socket, decrypts it with the connection's own keys
// (dtlsKeys, the node being the DTLS server of the publisher connection
// too) and publishes it into the room at once, instead of handing it up
// pion's receive chain: the UDP mux's queue, the ICE candidate's read
// loop, the DTLS/SRTP mux, the SRTP session's read loop and the track's
// interceptors, four goroutine hand-offs a packet (more than half the
// node's CPU at 400 published audio tracks; profile in ARCHITECTURE.md).
//
// What pion's interceptors did for such a track the node does itself:
// the transport-wide feedback the browser's estimate runs on and the
// NACKs for missing video packets (feedback.go, which the direct path
// tells of every packet it takes), and the reception reports
// (directReports rewrites pion's for the tracks that went direct from
// what take counted, upTrack.stats).
//
// A track goes direct once pion has delivered its first packet (OnTrack);
// a packet the direct path cannot take (another address, an SSRC not
// registered, an authentication tag its keys do not verify) goes on to
// pion as before, so a mistake here costs the path, not the media. A
// replayed or otherwise refused packet is dropped, as pion drops it.
type directIn struct {
	mu  sync.RWMutex
	by  map[netip.AddrPort]*directPub // by the selected pair's remote address
	all map[*directPub]netip.AddrPort

	audio, video, refused atomic.Uint64 // packets taken by kind, and refused
}

func newDirectIn() *directIn {
	return &directIn{by: map[netip.AddrPort]*directPub{}, all: map[*directPub]netip.AddrPort{}}
}

// directPub is one publisher connection's part of the path: its keys and
// the tracks that went direct.
type directPub struct {
	in   *directIn
	keys *dtlsKeys

	mu      sync.Mutex // guards ctx, tracks, hdr
	ctx     *srtp.Context
	tracks  map[uint32]*directTrack
	hdr     rtp.Header
	started bool
	closed  atomic.Bool // close was called: follow files it no more
	// fb is the connection's feedback (feedback.go): the direct path
	// records each packet it takes in it, as pion's read chain does.
	fb atomic.Pointer[feedback]
}

// directTrack is a track that went direct.
type directTrack struct {
	u      *upTrack
	rocSet bool // the context's rollover count was set from pion's
}

// start opens the path for the connection: called once it is connected
// (a track arrived); false if the keys are not known (the node was the
// DTLS client).
func (x *directPub) start(ice *webrtc.ICETransport) bool {
	x.mu.Lock()
	if x.started {
		ok := x.ctx != nil
		x.mu.Unlock()
		return ok
	}
	x.started = true
	ctx, err := x.keys.remoteContext()
	if err != nil {
		x.mu.Unlock()
		return false
	}
	x.ctx = ctx
	x.tracks = map[uint32]*directTrack{}
	x.mu.Unlock()
	ice.OnSelectedCandidatePairChange(x.follow)
	pair, err := ice.GetSelectedCandidatePair()
	if err != nil {
		return false
	}
	x.follow(pair)
	return true
}

// follow files the connection under its selected pair's remote address
// while the pair is UDP, and under none otherwise.
func (x *directPub) follow(pair *webrtc.ICECandidatePair) {
	var to netip.AddrPort
	if pair != nil && pair.Remote != nil && pair.Remote.Protocol == webrtc.ICEProtocolUDP &&
		pair.Local != nil && pair.Local.Protocol == webrtc.ICEProtocolUDP {
		if a, err := netip.ParseAddr(pair.Remote.Address); err == nil && a.Unmap().Is4() {
			to = netip.AddrPortFrom(a.Unmap(), pair.Remote.Port)
		}
	}
	if x.closed.Load() {
		return
	}
	x.in.file(x, to)
}

// add makes u's packets go direct.
func (x *directPub) add(u *upTrack) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ctx != nil {
		x.tracks[uint32(u.remote.SSRC())] = &directTrack{u: u}
	}
}

// remove gives u's packets back to pion (the track ended).
func (x *directPub) remove(u *upTrack) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.tracks, uint32(u.remote.SSRC()))
}

// close takes the connection off the path.
func (x *directPub) close() {
	x.closed.Store(true)
	x.in.file(x, netip.AddrPort{})
}

// file puts x under address to (none if not valid).
func (in *directIn) file(x *directPub, to netip.AddrPort) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if x.closed.Load() {
		to = netip.AddrPort{}
	}
	if old, ok := in.all[x]; ok {
		if in.by[old] == x {
			delete(in.by, old)
		}
		delete(in.all, x)
	}
	if to.IsValid() {
		in.by[to] = x
		in.all[x] = to
	}
}

// take publishes b, a datagram from the socket, if it is a packet of a
// track that went direct; false hands it to pion.
func (in *directIn) take(b []byte, from netip.AddrPort) bool {
	// RTP (RFC 5764 §5.1.2: 128..191), not RTCP (RFC 5761: 192..223).
	if len(b) < 12 || b[0]&0xc0 != 0x80 || (b[1] >= 192 && b[1] <= 223) {
		return false
	}
	in.mu.RLock()
	x := in.by[from]
	in.mu.RUnlock()
	if x == nil {
		return false
	}
	ssrc := uint32(b[8])<<24 | uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
	x.mu.Lock()
	t := x.tracks[ssrc]
	if t == nil || t.u.closed.Load() {
		x.mu.Unlock()
		return false
	}
	if !t.rocSet {
		// Pion's context has counted the wraps of the packets before;
		// this one carries on from there.
		seq := uint16(b[2])<<8 | uint16(b[3])
		x.ctx.SetROC(ssrc, t.u.rocFor(seq))
		t.rocSet = true
	}
	pk := media.NewPacket()
	buf := pk.Buffer()
	out, err := x.ctx.DecryptRTP(buf[:0], b, &x.hdr)
	if fb := x.fb.Load(); err == nil && fb != nil {
		fb.seen(ssrc, &x.hdr, time.Now())
	}
	x.mu.Unlock()
	if err != nil {
		pk.Release()
		if errors.Is(err, srtp.ErrFailedToVerifyAuthTag) {
			return false // not ours to judge: pion's keys may take it
		}
		in.refused.Add(1)
		return true
	}
	if len(out) > len(buf) || (len(out) > 0 && &out[0] != &buf[0]) {
		pk.Release() // decrypted elsewhere: not expected, so let pion do it
		return false
	}
	pk.SetLen(len(out))
	if t.u.kind == media.Audio {
		in.audio.Add(1)
	} else {
		in.video.Add(1)
	}
	t.u.take(pk)
	return true
}

// directReports is an interceptor of a publisher connection with a direct
// path: pion's receiver reports on a track that went direct would say
// only what pion saw before; it fills their counts (loss, highest
// sequence number, jitter) from the direct path's, and keeps pion's LSR
// and DLSR (the sender reports still pass pion).
type directReports struct{ x *directPub }

// NewInterceptor implements interceptor.Factory.
func (f directReports) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &directReporter{x: f.x}, nil
}

type directReporter struct {
	interceptor.NoOp
	x *directPub
}

// BindRTCPWriter rewrites the reports pion's receiver interceptor writes.
func (r *directReporter) BindRTCPWriter(w interceptor.RTCPWriter) interceptor.RTCPWriter {
	return interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, a interceptor.Attributes) (int, error) {
		for _, p := range pkts {
			if rr, ok := p.(*rtcp.ReceiverReport); ok {
				for i := range rr.Reports {
					if u := r.x.track(rr.Reports[i].SSRC); u != nil {
						u.mu.Lock()
						u.rx.report(&rr.Reports[i])
						u.mu.Unlock()
					}
				}
			}
		}
		return w.Write(pkts, a)
	})
}

// track is the track of ssrc that went direct, nil if none.
func (x *directPub) track(ssrc uint32) *upTrack {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t := x.tracks[ssrc]; t != nil && t.rocSet {
		return t.u
	}
	return nil
}
