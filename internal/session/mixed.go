package session

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/ingest"
	"github.com/convene/convene/internal/mixer"
)

// mixedMedia is a plain RTP link that hears its subgroup's audio mix
// instead of every stream: the link sends into the room like any other,
// and the group's mixer delivers its mix to the link.
type mixedMedia struct {
	rtpMedia
	svc     *mixer.Service
	session string
	room    *broker.Room
	out     *mixer.Output

	mu     sync.Mutex
	detach func()
	closed bool
}

// SetGroup moves the link's mix to the mixer of group (a member moved to
// another subgroup).
func (m *mixedMedia) SetGroup(group string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if m.detach != nil {
		m.detach()
		m.detach = nil
	}
	d, err := m.svc.Attach(m.session, group, m.room, m.out)
	if errors.Is(err, mixer.ErrCapacity) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err) // mixer.ErrCapacity: a node with room may take the endpoint
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	m.detach = d
	return nil
}

func (m *mixedMedia) Close() {
	m.mu.Lock()
	m.closed = true
	if m.detach != nil {
		m.detach()
		m.detach = nil
	}
	m.mu.Unlock()
	m.rtpMedia.Close()
}

// regrouper is a link whose media follows its member to another subgroup
// by more than the room's own SetGroup (a mixed link changes mixers).
type regrouper interface{ SetGroup(group string) error }

// parseMix reads a link's mix: a codec ("PCMU", "opus/48000/2:111"),
// optionally with the RFC 4733 payload type the endpoint sends digits
// with: "PCMU;telephone-event=101".
func parseMix(s string) (codec.Spec, uint8, error) {
	name, params, _ := strings.Cut(s, ";")
	spec, err := codec.Parse(name)
	if err != nil {
		return codec.Spec{}, 0, fmt.Errorf("%w: mix: %v", ErrInvalid, err)
	}
	var te uint8
	if params != "" {
		v, ok := strings.CutPrefix(params, "telephone-event=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 96 || n > 127 || n == int(spec.PT) {
			return codec.Spec{}, 0, fmt.Errorf("%w: mix: %q: want telephone-event=<96..127> after the codec", ErrInvalid, params)
		}
		te = uint8(n)
	}
	return spec, te, nil
}

// parseLinkCodec reads a link's codec (NewRTPLink.Codec), which must be of
// the link's kind; "" names none.
func parseLinkCodec(kind, s string) (ingest.Codec, error) {
	if s == "" {
		return ingest.Codec{}, nil
	}
	c, err := ingest.ParseCodec(s)
	if err != nil {
		return ingest.Codec{}, fmt.Errorf("%w: codec: %v", ErrInvalid, err)
	}
	if c.Kind.String() != kind {
		return ingest.Codec{}, fmt.Errorf("%w: codec %q is %s, the link carries %s", ErrInvalid, s, c.Kind, kind)
	}
	return c, nil
}

// mixInfo describes what an endpoint hearing a mix in spec sends: the same
// codec, so that its track names it (a dynamic payload type, Opus's, says
// nothing by itself to a recording).
func mixInfo(spec codec.Spec) broker.TrackInfo {
	ch := uint16(1)
	if strings.EqualFold(spec.Name, "opus") {
		ch = 2 // RFC 7587 §7: always "opus/48000/2"
	}
	return broker.TrackInfo{Codec: "audio/" + spec.Name, ClockRate: uint32(spec.RTPClock()), Channels: ch, Source: "rtp"}
}
