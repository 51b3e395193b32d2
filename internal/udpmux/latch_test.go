package udpmux

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
)

// TestLatchIfTellsStreamsApart: two endpoints latch on one IP, each for
// its own RTP payload type; the first datagram of each source goes to the
// endpoint that takes it, whichever comes first, and each learns its own
// source (a phone's video first must not be learnt as its audio).
func TestLatchIfTellsStreamsApart(t *testing.T) {
	s := listen(t, false)
	video, audio := udp(t), udp(t)
	pt := func(want byte) func(b []byte) bool {
		return func(b []byte) bool { return len(b) >= 12 && b[1]&0x7f == want }
	}
	type got struct {
		who  string
		from netip.AddrPort
	}
	ch := make(chan got, 10)
	learnt := make(chan got, 2)
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	for who, p := range map[string]byte{"audio": 0, "video": 100} {
		s.LatchIf(lo, 5*time.Second, pt(p), handlerFunc(func(pk *media.Packet, from netip.AddrPort) {
			ch <- got{who, from}
			pk.Release()
		}), func(from netip.AddrPort) { learnt <- got{who, from} })
	}
	rtp := func(c *net.UDPConn, pt byte) {
		b := make([]byte, 20)
		b[0], b[1] = 0x80, pt
		if _, err := c.WriteToUDPAddrPort(b, s.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	rtp(video, 100) // the video first: the audio latch does not take it
	rtp(audio, 0)
	rtp(video, 100)
	want := map[string]netip.AddrPort{"audio": addrOf(audio), "video": addrOf(video)}
	for range 3 {
		select {
		case g := <-ch:
			if g.from != want[g.who] {
				t.Errorf("%s got a datagram from %v, want only %v's", g.who, g.from, want[g.who])
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a datagram did not arrive")
		}
	}
	for range 2 {
		if g := <-learnt; g.from != want[g.who] {
			t.Errorf("%s learnt %v, want %v", g.who, g.from, want[g.who])
		}
	}
}
