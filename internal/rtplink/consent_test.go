package rtplink

import (
	"fmt"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

func consentDrops(l *Link) uint64 { return l.Stats().Dropped[media.DropConsent] }

// A link with Config.Consent sends nothing to its endpoint until the
// endpoint has sent an RTP packet from that exact address; then it gets
// media. The first datagram the endpoint reads is the packet sent after its
// consent, a sentinel that shows the one before never arrived.
func TestConsentBeforeSending(t *testing.T) {
	v := newEnv(t)
	a, b := newPairEndpoint(t, "speaker"), newPairEndpoint(t, "target")
	v.open(t, a, Config{})
	lb := v.open(t, b, Config{Consent: time.Hour})
	if lb.Consented() {
		t.Fatal("a consent link starts consented")
	}

	early := rtpPacket(t, 0xa, 1, 200)
	send(t, a.rtp, v.socks.RTP, early)
	testutil.WaitUntil(t, arrival, func() string {
		if n := consentDrops(lb); n != 1 {
			return fmt.Sprintf("consent drops %d, want 1", n)
		}
		return ""
	})

	// A third party sending from another port of the same host does not
	// give consent: only the link's exact address does.
	other := newEndpoint(t, "other", true)
	send(t, other.rtp, v.socks.RTP, rtpPacket(t, 0xc, 1, 100))
	testutil.WaitUntil(t, arrival, func() string {
		if v.socks.RTP.Stats().UnknownSource == 0 {
			return "the stranger's packet was not counted as unknown"
		}
		return ""
	})
	if lb.Consented() {
		t.Fatal("a packet from another address gave consent")
	}

	hello := rtpPacket(t, 0xb, 1, 100)
	send(t, b.rtp, v.socks.RTP, hello)
	expect(t, a.rtp, v.socks.RTP, "speaker hears the target", hello)
	if !lb.Consented() {
		t.Fatal("no consent after the endpoint sent")
	}
	late := rtpPacket(t, 0xa, 2, 200)
	send(t, a.rtp, v.socks.RTP, late)
	expect(t, b.rtp, v.socks.RTP, "target's first datagram is the one sent after consent", late)
	if n := consentDrops(lb); n != 1 {
		t.Fatalf("consent drops %d, want 1", n)
	}
}

// Consent lapses when the endpoint falls silent, and comes back when it
// sends again (RTCP counts as well as RTP).
func TestConsentExpires(t *testing.T) {
	v := newEnv(t)
	a, b := newPairEndpoint(t, "speaker"), newPairEndpoint(t, "target")
	v.open(t, a, Config{})
	lb := v.open(t, b, Config{Consent: 20 * time.Millisecond})

	send(t, b.rtp, v.socks.RTP, rtpPacket(t, 0xb, 1, 100))
	recv(t, a.rtp, v.socks.RTP, "speaker hears the target")
	testutil.WaitUntil(t, arrival, func() string {
		if lb.Consented() {
			return "consent did not lapse"
		}
		return ""
	})
	stale := rtpPacket(t, 0xa, 1, 200)
	send(t, a.rtp, v.socks.RTP, stale)
	testutil.WaitUntil(t, arrival, func() string {
		if n := consentDrops(lb); n != 1 {
			return fmt.Sprintf("consent drops %d, want 1", n)
		}
		return ""
	})

	// RTCP from the endpoint gives consent again. The timer may lapse it
	// once more before a packet arrives on a slow machine, so the speaker
	// sends until one does; the first to arrive must not be the stale one.
	buf := make([]byte, 2048)
	for i := range 100 {
		send(t, b.rtcp, v.socks.RTCP, rr(0xb))
		testutil.WaitUntil(t, arrival, func() string {
			if n := lb.Stats().RTCPIn; n != uint64(i+1) {
				return fmt.Sprintf("RTCP in %d, want %d", n, i+1)
			}
			return ""
		})
		fresh := rtpPacket(t, 0xa, uint16(2+i), 200)
		send(t, a.rtp, v.socks.RTP, fresh)
		b.rtp.SetReadDeadline(time.Now().Add(quiet))
		n, err := b.rtp.Read(buf)
		if err != nil {
			continue
		}
		if ssrcOf(buf[:n]) != 0xa || string(buf[:n]) == string(stale) {
			t.Fatalf("target got % x, want a packet sent after consent", buf[:n])
		}
		return
	}
	t.Fatal("no media reached the target after it sent RTCP")
}
