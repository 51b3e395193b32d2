package sfu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
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

// WHEP answers a WHEP viewer's offer: one audio and one video track that
// carry the pinned member's media (pin), or else the loudest speaker's.
func (s *SFU) WHEP(ctx context.Context, sessionID, memberID, offer, pin string, onClose func()) (*Resource, error) {
	p, err := s.newPeer(sessionID, memberID, modeWHEP)
	if err != nil {
		return nil, err
	}
	p.onClose = onClose
	p.pin = pin
	var ans string
	err = p.do(func() (err error) {
		ans, err = p.answerViewer(offer)
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
func (p *Peer) answerViewer(offer string) (string, error) {
	pc, err := p.s.eng.newPC(func(e ccEstimator) { p.est.Store(&e) })
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
		d, err := newDown(p, pc, kind.String(), codec,
			TrackDesc{ID: "whep-" + kind.String(), Stream: "whep", Kind: kind.String(), Source: "switched"}, "whep")
		if err != nil {
			return "", err
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
	return sdp, nil
}
