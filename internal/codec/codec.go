package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/audio"
)

// Spec is one codec of an RTP stream.
type Spec struct {
	Name string // "PCMU", "PCMA", "L16", "opus", "G722" (as SDP spells them)
	Rate int    // sample rate of its PCM in Hz
	// Clock is the RTP clock rate when it is not Rate: G.722 samples at
	// 16 kHz on an 8 kHz clock (RFC 3551 §4.5.2). 0 means Rate.
	Clock int
	PT    uint8 // RTP payload type
}

// RTPClock is the rate the codec's RTP timestamps count at.
func (s Spec) RTPClock() int {
	if s.Clock != 0 {
		return s.Clock
	}
	return s.Rate
}

// ToSamples converts a count of RTP clock ticks into PCM samples.
func (s Spec) ToSamples(ticks uint32) uint32 {
	if s.Clock == 0 || s.Clock == s.Rate {
		return ticks
	}
	return ticks * uint32(s.Rate/s.Clock)
}

// The codecs with a static payload type (RFC 3551) and the usual Opus one.
var (
	PCMU = Spec{Name: "PCMU", Rate: 8000, PT: 0}
	PCMA = Spec{Name: "PCMA", Rate: 8000, PT: 8}
	Opus = Spec{Name: "opus", Rate: 48000, PT: 111}
	G722 = Spec{Name: "G722", Rate: 16000, Clock: 8000, PT: 9}
)

// ErrUnknown is a codec, rate or payload type the node cannot decode.
var ErrUnknown = errors.New("codec: unknown codec")

// Parse reads a codec as an rtpmap names it, "PCMU", "PCMA/8000",
// "opus/48000/2", "G722/8000" or "L16/16000", with an optional payload
// type after a colon ("opus/48000/2:96"). Without one, a static codec gets
// its own (0, 8, 9), Opus 111 and L16 96.
func Parse(s string) (Spec, error) {
	spec, pt, hasPT := strings.Cut(strings.TrimSpace(s), ":")
	parts := strings.Split(spec, "/")
	var c Spec
	switch strings.ToUpper(parts[0]) {
	case "PCMU":
		c = PCMU
	case "PCMA":
		c = PCMA
	case "OPUS":
		c = Opus
	case "G722":
		c = G722
	case "L16":
		c = Spec{Name: "L16", Rate: 16000, PT: 96}
	default:
		return Spec{}, fmt.Errorf("%w %q: use PCMU, PCMA, G722, opus/48000/2 or L16/<rate>", ErrUnknown, parts[0])
	}
	if len(parts) > 1 {
		r, err := strconv.Atoi(parts[1])
		if err != nil {
			return Spec{}, fmt.Errorf("%w: rate %q", ErrUnknown, parts[1])
		}
		if r != c.RTPClock() && c.Name != "L16" {
			return Spec{}, fmt.Errorf("%w: %s's RTP clock runs at %d Hz, not %d", ErrUnknown, c.Name, c.RTPClock(), r)
		}
		if c.Name == "L16" {
			c.Rate = r
		}
	}
	if c.Name == "L16" && c.Rate != 8000 && c.Rate != 16000 && c.Rate != 48000 {
		return Spec{}, fmt.Errorf("%w: L16 at 8000, 16000 or 48000 Hz, not %d", ErrUnknown, c.Rate)
	}
	if len(parts) > 2 && parts[2] != "1" && parts[2] != "2" {
		return Spec{}, fmt.Errorf("%w: %q channels", ErrUnknown, parts[2])
	}
	if hasPT {
		n, err := strconv.Atoi(pt)
		if err != nil || n < 0 || n > 127 {
			return Spec{}, fmt.Errorf("%w: payload type %q is not 0..127", ErrUnknown, pt)
		}
		c.PT = uint8(n)
	}
	return c, nil
}

// FrameSamples is the samples in a 20 ms frame at the codec's rate.
func (s Spec) FrameSamples() int { return s.Rate / 50 }

// FrameTicks is how far a 20 ms frame advances the RTP timestamp.
func (s Spec) FrameTicks() int { return s.RTPClock() / 50 }

// Decoder turns one stream's payloads into PCM at the codec's rate.
type Decoder interface {
	// Decode writes the samples of payload into pcm and returns how many.
	Decode(payload []byte, pcm []int16) (int, error)
}

// Encoder turns PCM at the codec's rate into payloads.
type Encoder interface {
	// Encode writes the payload of one frame into out and returns its length.
	Encode(pcm []int16, out []byte) (int, error)
}

// NewDecoder returns a decoder for s.
func NewDecoder(s Spec) (Decoder, error) {
	switch s.Name {
	case "opus":
		return newOpusDecoder()
	case "G722":
		return newG722Decoder()
	}
	return stateless(s)
}

// NewEncoder returns an encoder for s.
func NewEncoder(s Spec) (Encoder, error) {
	switch s.Name {
	case "opus":
		return newOpusEncoder()
	case "G722":
		return newG722Encoder()
	}
	return stateless(s)
}

// stateless is a codec that keeps no state between frames, so one value
// both decodes and encodes.
func stateless(s Spec) (interface {
	Decoder
	Encoder
}, error) {
	switch s.Name {
	case "PCMU":
		return g711{mu: true}, nil
	case "PCMA":
		return g711{}, nil
	case "L16":
		return l16{}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknown, s.Name)
}

type g711 struct{ mu bool }

func (g g711) Decode(p []byte, pcm []int16) (int, error) {
	if len(p) > len(pcm) {
		return 0, fmt.Errorf("codec: %d G.711 samples, room for %d", len(p), len(pcm))
	}
	if g.mu {
		return audio.DecodeMulaw(pcm, p), nil
	}
	return audio.DecodeAlaw(pcm, p), nil
}

func (g g711) Encode(pcm []int16, out []byte) (int, error) {
	if len(out) < len(pcm) {
		return 0, errors.New("codec: output too small")
	}
	if g.mu {
		return audio.EncodeMulaw(out, pcm), nil
	}
	return audio.EncodeAlaw(out, pcm), nil
}

type l16 struct{}

func (l16) Decode(p []byte, pcm []int16) (int, error) {
	if len(p)%2 != 0 {
		return 0, fmt.Errorf("codec: L16 payload of %d bytes is not whole samples", len(p))
	}
	n := len(p) / 2
	if n > len(pcm) {
		return 0, fmt.Errorf("codec: %d L16 samples, room for %d", n, len(pcm))
	}
	for i := range n {
		pcm[i] = int16(binary.BigEndian.Uint16(p[2*i:]))
	}
	return n, nil
}

func (l16) Encode(pcm []int16, out []byte) (int, error) {
	if len(out) < 2*len(pcm) {
		return 0, errors.New("codec: output too small")
	}
	for i, s := range pcm {
		binary.BigEndian.PutUint16(out[2*i:], uint16(s))
	}
	return 2 * len(pcm), nil
}
