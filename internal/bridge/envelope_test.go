package bridge

import (
	"bytes"
	"testing"

	"github.com/convene/convene/internal/media"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	pkt := []byte{0x80, 200, 0, 1, 1, 2, 3, 4}
	for _, c := range []struct {
		kind  media.Kind
		rtcp  bool
		owner string
	}{{media.Audio, false, ""}, {media.Video, true, "m_1"}, {media.Audio, true, string(bytes.Repeat([]byte("x"), 300))}} {
		msg := appendEnvelope(nil, 7, c.kind, c.rtcp, c.owner, pkt)
		n, kind, rtcp, rest, err := parseEnvelope(msg)
		if err != nil || n != 7 || kind != c.kind || rtcp != c.rtcp {
			t.Fatalf("%+v: n %d kind %v rtcp %v err %v", c, n, kind, rtcp, err)
		}
		if !c.rtcp {
			if !bytes.Equal(rest, pkt) || len(msg) != EnvelopeLen+len(pkt) {
				t.Fatalf("RTP: %x", msg)
			}
			continue
		}
		owner, got, err := parseRTCP(rest)
		if err != nil || owner != c.owner[:min(len(c.owner), MaxOwner)] || !bytes.Equal(got, pkt) {
			t.Fatalf("RTCP %+v: owner %q packet %x err %v", c, owner, got, err)
		}
	}
}

// FuzzEnvelope: a message from another node (or anyone on NATS) never
// panics the parsers, and what parses aliases the message within bounds.
func FuzzEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, 1, media.Audio, false, "", []byte{0x80, 0, 0, 1}))
	f.Add(appendEnvelope(nil, 0, media.Video, true, "m_1", []byte{0x80, 201, 0, 1, 0, 0, 0, 1}))
	f.Add([]byte{0x50, 0, 0, 0, 0, 9, 'a'})
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, _, rtcp, rest, err := parseEnvelope(msg)
		if err != nil {
			return
		}
		if len(rest) != len(msg)-EnvelopeLen {
			t.Fatalf("rest %d of %d", len(rest), len(msg))
		}
		if rtcp {
			owner, pkt, err := parseRTCP(rest)
			if err == nil && len(owner)+1+len(pkt) != len(rest) {
				t.Fatalf("owner %d + packet %d of %d", len(owner), len(pkt), len(rest))
			}
		}
	})
}
