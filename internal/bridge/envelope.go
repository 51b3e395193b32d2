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
)

// appendEnvelope appends the envelope of track n's packet and the packet.
func appendEnvelope(dst []byte, n uint32, kind media.Kind, rtcp bool, pkt []byte) []byte {
	b := byte(envVersion)
	if kind == media.Video {
		b |= envVideo
	}
	if rtcp {
		b |= envRTCP
	}
	dst = append(dst, b, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], n)
	return append(dst, pkt...)
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
