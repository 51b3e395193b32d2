package sfu

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/media"
)

// historySize is how many packets a video down track keeps to answer
// NACKs: about 5 s of a 900 kbit/s layer. A power of two.
const historySize = 512

// history is a video down track's recently sent packets, kept to answer
// the subscriber's NACKs. It holds a reference to the packet the broker
// delivered, shared with every other subscriber of the publisher, and the
// header fields this subscriber's copy carried; a subscriber costs an
// entry per packet, not a copy of it.
type history struct {
	mu     sync.Mutex
	closed bool
	ring   [historySize]sentPacket
	newest uint16 // the seq of the newest packet added
	any    bool   // a packet was added
}

type sentPacket struct {
	pk      *media.Packet
	payload []byte // within pk
	seq     uint16
	ts      uint32
	marker  bool
}

// add keeps pk (taking a reference) as sent with seq, ts and marker.
func (h *history) add(pk *media.Packet, payload []byte, seq uint16, ts uint32, marker bool) {
	pk.Retain(1)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		pk.Release()
		return
	}
	e := &h.ring[seq%historySize]
	old := e.pk
	*e = sentPacket{pk: pk, payload: payload, seq: seq, ts: ts, marker: marker}
	if !h.any || int16(seq-h.newest) > 0 {
		h.newest, h.any = seq, true
	}
	h.mu.Unlock()
	if old != nil {
		old.Release()
	}
}

// get returns the packet sent as seq with a reference the caller releases.
func (h *history) get(seq uint16) (sentPacket, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.ring[seq%historySize]
	if e.pk == nil || e.seq != seq {
		return sentPacket{}, false
	}
	e.pk.Retain(1)
	return e, true
}

// sinceKeyframe returns the packets from the newest keyframe's first one
// to the newest packet, each with a reference the caller releases, if
// that keyframe is among the newest replayMax packets, every packet from
// it on is kept, and it is less than maxAge (in RTP time) older than the
// newest; else nothing.
func (h *history) sinceKeyframe(isKey func([]byte) bool, maxAge uint32) []sentPacket {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.any {
		return nil
	}
	last := h.ring[h.newest%historySize]
	for back := uint16(0); back < replayMax; back++ {
		seq := h.newest - back
		e := h.ring[seq%historySize]
		if e.pk == nil || e.seq != seq || last.ts-e.ts >= maxAge {
			return nil // a gap, or too old: no keyframe to start from
		}
		if !isKey(e.payload) {
			continue
		}
		out := make([]sentPacket, 0, back+1)
		for i := uint16(0); i <= back; i++ {
			x := h.ring[(seq+i)%historySize]
			x.pk.Retain(1)
			out = append(out, x)
		}
		return out
	}
	return nil
}

// replayMax bounds what a new subscriber is sent from the history at once.
const replayMax = 160

// close drops every reference; later adds are refused.
func (h *history) close() {
	h.mu.Lock()
	h.closed = true
	var held []*media.Packet
	for i := range h.ring {
		if h.ring[i].pk != nil {
			held = append(held, h.ring[i].pk)
			h.ring[i] = sentPacket{}
		}
	}
	h.mu.Unlock()
	for _, pk := range held {
		pk.Release()
	}
}

// localTrack is a sending track whose writes go straight to the binding's
// write stream: the writer sets the header itself, so nothing copies the
// packet on the way (pion's TrackLocalStaticRTP copies it into a pooled
// packet). It embeds TrackLocalStaticRTP for the codec negotiation.
type localTrack struct {
	*webrtc.TrackLocalStaticRTP
	bound atomic.Pointer[binding]
	// instead, if set, offers a codec to bind in place of the track's own
	// when the receiver took none of it (a browser without H.264 sent an
	// H.264 camera): the track then carries that codec, fed by a video
	// transcoder (see downTrack.rebind). Set before the track is bound.
	instead func(negotiated []webrtc.RTPCodecParameters) (webrtc.RTPCodecCapability, bool)
	alt     atomic.Pointer[webrtc.TrackLocalStaticRTP] // the track bound instead
	// direct, if set, is the connection's direct path (audio only),
	// tried before pion's; set before the track is added.
	direct *directOut
}

type binding struct {
	ssrc uint32
	pt   uint8
	w    webrtc.TrackLocalWriter
	mime string // the codec bound
}

// mime is the codec the track carries: the one bound, else its own.
func (t *localTrack) mime() string {
	if b := t.bound.Load(); b != nil {
		return b.mime
	}
	return t.Codec().MimeType
}

func newLocalTrack(c webrtc.RTPCodecCapability, id, stream string) (*localTrack, error) {
	t, err := webrtc.NewTrackLocalStaticRTP(c, id, stream)
	if err != nil {
		return nil, err
	}
	return &localTrack{TrackLocalStaticRTP: t}, nil
}

// Bind notes the connection's SSRC, payload type and write stream. When
// the receiver took none of the track's codec, it binds the codec instead
// offers, if any.
func (t *localTrack) Bind(c webrtc.TrackLocalContext) (webrtc.RTPCodecParameters, error) {
	codec, err := t.TrackLocalStaticRTP.Bind(c)
	if errors.Is(err, webrtc.ErrUnsupportedCodec) && t.instead != nil {
		if alt, ok := t.instead(c.CodecParameters()); ok {
			inner, aerr := webrtc.NewTrackLocalStaticRTP(alt, t.ID(), t.StreamID())
			if aerr != nil {
				return codec, err
			}
			if codec, err = inner.Bind(c); err == nil {
				t.alt.Store(inner)
			}
		}
	}
	if err == nil {
		t.bound.Store(&binding{ssrc: uint32(c.SSRC()), pt: uint8(codec.PayloadType), w: c.WriteStream(), mime: codec.MimeType})
	}
	return codec, err
}

// Unbind forgets the binding.
func (t *localTrack) Unbind(c webrtc.TrackLocalContext) error {
	t.bound.Store(nil)
	if alt := t.alt.Load(); alt != nil {
		return alt.Unbind(c)
	}
	return t.TrackLocalStaticRTP.Unbind(c)
}

// write sends one packet with header h (its SSRC and payload type set
// here) through the connection's interceptors and SRTP.
func (t *localTrack) write(h *rtp.Header, payload []byte) error {
	b := t.bound.Load()
	if b == nil {
		return errUnbound
	}
	h.SSRC, h.PayloadType = b.ssrc, b.pt
	if t.direct != nil && t.direct.write(h, payload, &t.direct.conn.directAudio) {
		return nil
	}
	_, err := b.w.WriteRTP(h, payload)
	return err
}

var errUnbound = errors.New("sfu: track not bound to a connection")
