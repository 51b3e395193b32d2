package rtplink

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// An endpoint behind NAT (its SDP names a private address it cannot be
// reached at) is learnt from its first packets, when they come from the IP
// it may latch to (its signalling source); a stranger at another IP is
// not, and once learnt its source is never replaced, even by another port
// of the same IP. With consent on, it hears nothing until it has sent.
func TestLatchLearnsAnEndpointBehindNAT(t *testing.T) {
	v := newEnv(t)
	speaker := newPairEndpoint(t, "speaker")
	v.open(t, speaker, Config{})
	phone := newEndpoint(t, "phone", false) // RTP and RTCP on unrelated ports, as a NAT maps them
	private := netip.MustParseAddrPort("10.11.12.13:4000")
	lp := v.open(t, phone, Config{Remote: private, Consent: time.Hour,
		Latch: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, LatchWindow: time.Hour})

	// A stranger at another IP speaks first: not learnt.
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 66)})
	if err != nil {
		t.Skipf("no 127.0.0.66 here: %v", err)
	}
	closeOnCleanup(t, stranger)
	send(t, stranger, v.socks.RTP, rtpPacket(t, 0x66, 1, 100))
	testutil.WaitUntil(t, arrival, func() string {
		if v.socks.RTP.Stats().UnknownSource != 1 {
			return "the stranger's packet was not refused as unknown"
		}
		return ""
	})

	hello := rtpPacket(t, 0xb, 1, 100)
	send(t, phone.rtp, v.socks.RTP, hello)
	expect(t, speaker.rtp, v.socks.RTP, "the speaker hears the phone", hello)
	again := rtpPacket(t, 0xb, 2, 100)
	send(t, phone.rtp, v.socks.RTP, again)
	expect(t, speaker.rtp, v.socks.RTP, "the speaker hears the phone's next packet", again)
	send(t, phone.rtcp, v.socks.RTCP, rr(0xb))
	testutil.WaitUntil(t, arrival, func() string {
		if st := lp.Stats(); st.RTCPIn != 1 {
			return fmt.Sprintf("the phone's RTCP from its own port: %d in", st.RTCPIn)
		}
		return ""
	})
	if got := v.socks.RTP.Stats().Latched; got != 1 {
		t.Fatalf("sources latched on the RTP socket: %d, want 1", got)
	}
	talk := rtpPacket(t, 0xa, 1, 200)
	send(t, speaker.rtp, v.socks.RTP, talk)
	expect(t, phone.rtp, v.socks.RTP, "the phone hears the speaker at the address it sent from", talk)

	// Another port of the same IP may not take the phone's place.
	other := newEndpoint(t, "other", true)
	send(t, other.rtp, v.socks.RTP, rtpPacket(t, 0xc, 1, 100))
	testutil.WaitUntil(t, arrival, func() string {
		if v.socks.RTP.Stats().UnknownSource != 2 {
			return "the second source of the IP was not refused"
		}
		return ""
	})
	talk2 := rtpPacket(t, 0xa, 2, 200)
	send(t, speaker.rtp, v.socks.RTP, talk2)
	expect(t, phone.rtp, v.socks.RTP, "the phone still hears the speaker", talk2)
	expectQuiet(t, other)
}

// A latch ends: after its window, or once the endpoint was heard at its
// own address (no NAT), a source at the latch's IP is a stranger.
func TestLatchEnds(t *testing.T) {
	v := newEnv(t)
	ip := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	direct := newPairEndpoint(t, "direct")
	v.open(t, direct, Config{Latch: ip, LatchWindow: time.Hour})
	send(t, direct.rtp, v.socks.RTP, rtpPacket(t, 0xd, 1, 100))
	late := newPairEndpoint(t, "late")
	v.open(t, late, Config{Remote: netip.MustParseAddrPort("10.11.12.13:4000"), Latch: ip, LatchWindow: time.Millisecond})
	time.Sleep(20 * time.Millisecond)
	// From the IP both latched to, after one heard and the other's window.
	send(t, late.rtp, v.socks.RTP, rtpPacket(t, 0xe, 1, 100))
	testutil.WaitUntil(t, arrival, func() string {
		if st := v.socks.RTP.Stats(); st.UnknownSource != 1 || st.Latched != 0 {
			return fmt.Sprintf("unknown %d latched %d, want 1 and 0", st.UnknownSource, st.Latched)
		}
		return ""
	})
}
