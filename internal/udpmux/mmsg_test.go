package udpmux

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

func packet(s string) *media.Packet {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), s))
	return p
}

// TestBatchFamilies sends through sendmmsg from an IPv4 socket and from a
// dual-stack IPv6 one. The dual-stack socket reaches an IPv4 receiver
// through the v4-mapped sockaddr; on the IPv4 socket a datagram to an IPv6
// destination fails alone, counted as an error, and the datagrams around it
// in the same batch still arrive.
func TestBatchFamilies(t *testing.T) {
	t.Run("ipv4 socket", func(t *testing.T) {
		s := listen(t, true)
		a, b := udp(t), udp(t)
		v6 := NewDest(netip.MustParseAddrPort("[::1]:9"), 8)
		da, db := NewDest(addrOf(a), 8), NewDest(addrOf(b), 8)
		// Same writer for all three, so that they share a batch.
		da.shard, db.shard, v6.shard = 0, 0, 0
		w := s.ws[0]
		w.mu.Lock() // hold the writer so the three are queued together
		w.q[media.Audio] = append(w.q[media.Audio], entry{packet("one"), da}, entry{packet("bad"), v6}, entry{packet("two"), db})
		for _, d := range []*Dest{da, v6, db} {
			d.inflight.Add(1)
		}
		wake := w.sleeping
		w.sleeping = false
		w.mu.Unlock()
		if wake {
			w.wake <- struct{}{}
		}
		if got := string(recvOne(t, a)); got != "one" {
			t.Errorf("a got %q", got)
		}
		if got := string(recvOne(t, b)); got != "two" {
			t.Errorf("b got %q", got)
		}
		testutil.WaitFor(t, 5*time.Second, "the unreachable destination's error and the other's packet", func() bool { return v6.Stats().Errors == 1 && db.Stats().Packets == 1 })
		if st := v6.Stats(); st.Packets != 0 {
			t.Errorf("IPv6 destination on an IPv4 socket: %+v", st)
		}
	})
	t.Run("dual-stack socket", func(t *testing.T) {
		s, err := Listen("[::]:0", Options{Batch: true})
		if err != nil {
			t.Skip("no IPv6 here:", err)
		}
		defer s.Close()
		if !s.ws[0].mm.v6 {
			t.Fatal("dual-stack socket not seen as AF_INET6")
		}
		c := udp(t)
		d := NewDest(addrOf(c), 8)
		if !s.Send(packet("mapped"), d) {
			t.Fatal("dropped")
		}
		if got := string(recvOne(t, c)); got != "mapped" {
			t.Errorf("got %q", got)
		}
		c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		if err != nil {
			t.Skip("no IPv6 loopback:", err)
		}
		defer c6.Close()
		if !s.Send(packet("six"), NewDest(addrOf(c6), 8)) {
			t.Fatal("dropped")
		}
		if got := string(recvOne(t, c6)); got != "six" {
			t.Errorf("got %q", got)
		}
	})
}

// TestShardSpread: listeners that differ only in address, or only in port,
// are spread over two writers, not all put on one.
func TestShardSpread(t *testing.T) {
	var byAddr, byPort [2]int
	for i := 0; i < 1000; i++ {
		a := netip.MustParseAddr("127.77." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1))
		byAddr[NewDest(netip.AddrPortFrom(a, 5000), 1).shard%2]++
		byPort[NewDest(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(20000+i)), 1).shard%2]++
	}
	for _, c := range [][2]int{byAddr, byPort} {
		if c[0] < 400 || c[1] < 400 {
			t.Errorf("uneven spread over two writers: %v", c)
		}
	}
}
