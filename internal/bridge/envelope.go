package bridge

import (
	"encoding/binary"
	"errors"

	"github.com/convene/convene/internal/media"
)

// EnvelopeLen is the bytes the bridge adds to each packet (doc.go).
const EnvelopeLen = 5

const (
	envVersion = 1 << 6
	envVideo   = 1 << 5
	envRTCP    = 1 << 4
)

// Envelope errors.
var (
	ErrShort   = errors.New("bridge: message shorter than the envelope")
	ErrVersion = errors.New("bridge: unknown envelope version")
	ErrRecord  = errors.New("bridge: RTCP record in a batch of RTP")
)

// MaxOwner bounds the owner ID an RTCP message carries.
const MaxOwner = 255

// appendEnvelope appends the envelope of track n's packet and the packet;
// an RTCP packet's envelope is followed by its sender's owner (a length
// byte, then the ID, cut at MaxOwner).
func appendEnvelope(dst []byte, n uint32, kind media.Kind, rtcp bool, owner string, pkt []byte) []byte {
	b := byte(envVersion)
	if kind == media.Video {
		b |= envVideo
	}
	if rtcp {
		b |= envRTCP
	}
	dst = append(dst, b, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], n)
	if rtcp {
		owner = owner[:min(len(owner), MaxOwner)]
		dst = append(append(dst, byte(len(owner))), owner...)
	}
	return append(dst, pkt...)
}

// parseRTCP splits what follows an RTCP message's envelope into its
// sender's owner and the packet (aliasing rest).
func parseRTCP(rest []byte) (owner string, pkt []byte, err error) {
	if len(rest) < 1 {
		return "", nil, ErrShort
	}
	n := 1 + int(rest[0]) // int: a byte's 1+255 would wrap to 0
	if len(rest) < n {
		return "", nil, ErrShort
	}
	return string(rest[1:n]), rest[n:], nil
}

// parseEnvelope returns a message's track number, kind, RTCP flag and
// packet; the packet aliases msg.
func parseEnvelope(msg []byte) (n uint32, kind media.Kind, rtcp bool, pkt []byte, err error) {
	if len(msg) < EnvelopeLen {
		return 0, 0, false, nil, ErrShort
	}
	if msg[0]&0xc0 != envVersion {
		return 0, 0, false, nil, ErrVersion
	}
	if msg[0]&envVideo != 0 {
		kind = media.Video
	}
	return binary.BigEndian.Uint32(msg[1:5]), kind, msg[0]&envRTCP != 0, msg[EnvelopeLen:], nil
}
