package sfu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/vtranscode"
)

// Resource is a WHIP or WHEP session: its ID is the last part of the URL
// the client deletes to hang up (unguessable: 128 random bits).
type Resource struct {
	ID     string
	Answer string
	Peer   *Peer
}

var resources sync.Map // ID -> *Resource

func newResourceID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// LookupResource finds a WHIP or WHEP resource of a session.
func (s *SFU) LookupResource(sessionID, id string) (*Resource, bool) {
	v, ok := resources.Load(id)
	if !ok || v.(*Resource).Peer.session != sessionID {
		return nil, false
	}
	return v.(*Resource), true
}

// Hangup ends a WHIP or WHEP resource of a session; false if there is none.
func (s *SFU) Hangup(sessionID, id string) bool {
	r, ok := s.LookupResource(sessionID, id)
	if !ok {
		return false
	}
	resources.Delete(id)
	r.Peer.Close()
	return true
}

func (s *SFU) track(p *Peer, ans string) *Resource {
	r := &Resource{ID: newResourceID(), Answer: ans, Peer: p}
	resources.Store(r.ID, r)
	go func() {
		<-p.done
		resources.Delete(r.ID)
	}()
	return r
}

// WHIP publishes a WHIP client's offer (RFC 9725) as member's tracks and
// returns the resource with the answer.
// onClose, if set, runs once the peer has hung up (the API makes the
// member it joined for the client leave).
func (s *SFU) WHIP(ctx context.Context, sessionID, memberID, offer string, onClose func()) (*Resource, error) {
	p, err := s.newPeer(sessionID, memberID, modeWHIP)
	if err != nil {
		return nil, err
	}
	p.onClose = onClose
	var ans string
	err = p.do(func() (err error) {
		ans, err = p.publish(offer, nil)
		return err
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return s.track(p, ans), nil
}

// ViewerOptions are what a WHEP viewer asks for besides its offer.
type ViewerOptions struct {
	// Pin is the member whose media to watch; "" for the loudest speaker.
	Pin string
	// MaxHeight and MaxFPS, when not zero, bound the picture and frame
	// rate of a camera transcoded for the viewer (16:9 classes), below
	// what its SDP allows.
	MaxHeight, MaxFPS int
}

// WHEP answers a WHEP viewer's offer: one audio and one video track that
// carry the pinned member's media (opt.Pin), or else the loudest speaker's.
func (s *SFU) WHEP(ctx context.Context, sessionID, memberID, offer string, opt ViewerOptions, onClose func()) (*Resource, error) {
	p, err := s.newPeer(sessionID, memberID, modeWHEP)
	if err != nil {
		return nil, err
	}
	p.onClose = onClose
	p.pin = opt.Pin
	var ans string
	err = p.do(func() (err error) {
		ans, err = p.answerViewer(offer, opt)
		return err
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return s.track(p, ans), nil
}

// answerViewer sets up a WHEP viewer's subscriber connection: a sending
// track for each kind the offer receives, in the codec of the room's
// tracks of that kind (Opus and VP8 when there are none yet).
func (p *Peer) answerViewer(offer string, opt ViewerOptions) (string, error) {
	pc, err := p.s.eng.newPC(func(e ccEstimator) { p.est.Store(&e) }, nil, nil) // the node answers: the DTLS client, no direct path
	if err != nil {
		return "", err
	}
	p.sub = pc
	p.subPC.Store(pc)
	p.watch(pc)
	if err := p.attachReceivers(); err != nil {
		return "", err
	}
	have := map[media.Kind]*broker.Track{}
	for _, link := range p.recvLinks {
		for _, t := range p.broom.Subscribed(link) {
			if have[t.Kind()] == nil {
				have[t.Kind()] = t
			}
		}
	}
	for _, kind := range []media.Kind{media.Audio, media.Video} {
		if !strings.Contains(offer, "\nm="+kind.String()+" ") {
			continue
		}
		codec := codecOpus.RTPCodecCapability
		if kind == media.Video {
			codec = codecVP8.RTPCodecCapability
		}
		// The viewer's one track of a kind switches between sources. Its
		// audio stays Opus when the node transcodes: a G.711 or G.722
		// source (a phone) reaches it through the transcoder, and a
		// browser's Opus as it is — a PCMU track chosen because a phone
		// happened to be first could carry no browser's voice.
		if t := have[kind]; t != nil && (kind == media.Video || p.s.cfg.Transcode == nil) {
			pt, ok := t.PayloadType()
			if c, ok := codecFor(t.Info().Codec, kind == media.Audio, pt, ok); ok {
				codec = c
			}
		}
		// Its video is a codec the viewer offered: the sources' own when it
		// takes it, else (when the node transcodes video) its first choice
		// of VP8 and H.264, in the size and rate its offer allows.
		var vt vtranscode.Target
		if kind == media.Video && p.s.cfg.Video != nil {
			codec, vt = viewerVideo(offer, codec)
			vt = vt.Within(opt.MaxHeight*16/9, opt.MaxHeight, opt.MaxFPS)
		}
		d, err := newDown(p, pc, kind.String(), codec,
			TrackDesc{ID: "whep-" + kind.String(), Stream: "whep", Kind: kind.String(), Source: "switched"}, "whep")
		if err != nil {
			return "", err
		}
		if *d.recode.Load() != "" {
			d.vtarget = vt
		}
		p.downs[d.key] = d
	}
	if len(p.downs) == 0 {
		return "", fmt.Errorf("the offer has no audio or video to receive")
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return "", fmt.Errorf("offer: %v", err)
	}
	ans, err := pc.CreateAnswer(nil)
	if err != nil {
		return "", fmt.Errorf("answer: %v", err)
	}
	sdp, err := p.localDescription(pc, ans)
	if err != nil {
		return "", err
	}
	p.syncSub()
	if d := p.downs[media.Video.String()]; d != nil {
		if err := d.refusal(); err != nil {
			// The camera it would watch needs a transcoder the node
			// cannot run now: say so (503) rather than show nothing.
			return "", err
		}
	}
	return sdp, nil
}

// offered is one video codec of a viewer's offer.
type offered struct {
	mime, fmtp, imageattr string
}

// offeredVideo lists the video codecs of an offer's first video section,
// in its order of preference, with their format parameters and image
// attributes (RFC 6236; one for all payload types with "*").
func offeredVideo(offer string) []offered {
	var sd sdp.SessionDescription
	if err := sd.UnmarshalString(offer); err != nil {
		return nil
	}
	for _, md := range sd.MediaDescriptions {
		if md.MediaName.Media != "video" {
			continue
		}
		attrs := map[string]string{}
		for _, a := range md.Attributes {
			if a.Key == "imageattr" {
				pt, v, _ := strings.Cut(a.Value, " ")
				attrs[pt] = v
			}
		}
		var out []offered
		for _, f := range md.MediaName.Formats {
			var pt uint8
			if _, err := fmt.Sscan(f, &pt); err != nil {
				continue
			}
			c, err := sd.GetCodecForPayloadType(pt)
			if err != nil {
				continue
			}
			ia, ok := attrs[f]
			if !ok {
				ia = attrs["*"]
			}
			out = append(out, offered{mime: "video/" + c.Name, fmtp: c.Fmtp, imageattr: ia})
		}
		return out
	}
	return nil
}

// viewerVideo is the video codec of a WHEP viewer's track and what it
// takes, from its offer: src (the sources' codec) when offered, else the
// first VP8 or H.264 it offers (the node transcodes to it); src as it
// is when the offer names neither.
func viewerVideo(offer string, src webrtc.RTPCodecCapability) (webrtc.RTPCodecCapability, vtranscode.Target) {
	var first *offered
	var firstCodec webrtc.RTPCodecCapability
	for _, o := range offeredVideo(offer) {
		c, ok := codecFor(o.mime, false, 0, false)
		if !ok {
			continue
		}
		if strings.EqualFold(c.MimeType, src.MimeType) {
			return src, vtranscode.FromSDP(c.MimeType, o.fmtp, o.imageattr)
		}
		if first == nil {
			o := o
			first, firstCodec = &o, c
		}
	}
	if first == nil {
		return src, vtranscode.Target{Codec: src.MimeType}
	}
	return firstCodec, vtranscode.FromSDP(firstCodec.MimeType, first.fmtp, first.imageattr)
}
