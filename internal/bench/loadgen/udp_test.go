package loadgen

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestListenersDemux sends real datagrams to listeners that share sockets:
// each reaches exactly the listener whose address it was sent to, with a
// kernel timestamp, and a datagram to an address no listener has is counted
// as stray.
func TestListenersDemux(t *testing.T) {
	const n = 10
	var ls []*Listener
	for i := range n {
		ls = append(ls, &Listener{Meeting: 0, Index: i})
	}
	clock := NewClock()
	u, err := ListenUDP(netip.MustParseAddr("127.42.0.250"), ls, 3, 1<<20, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	addrs := u.Addrs()
	if len(addrs) != n || addrs[0].Addr() != netip.MustParseAddr("127.42.0.250") || addrs[9].Addr() != netip.MustParseAddr("127.42.1.3") {
		t.Fatalf("addresses %v", addrs)
	}
	if addrs[0].Port() == addrs[1].Port() || addrs[0].Port() != addrs[3].Port() {
		t.Fatalf("listeners are not spread over the 3 sockets: %v", addrs)
	}
	u.Start()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 2048)
	// Listener i gets i+1 counted packets.
	for i, a := range addrs {
		for k := 0; k <= i; k++ {
			b := Build(buf, 200, 0, false, Packet{Meeting: 0, Index: uint32(Warmup + k), SendNs: clock.Now()})
			if _, err := conn.WriteToUDPAddrPort(b, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Last, to each socket's port but an address past the last listener:
	// a stray packet, counted as such, and the sentinel that says the
	// socket has read everything sent to it before (one sender, FIFO).
	for _, a := range addrs[:3] {
		stray := netip.AddrPortFrom(netip.MustParseAddr("127.42.1.4"), a.Port())
		b := Build(buf, 200, 0, false, Packet{Index: Warmup, SendNs: clock.Now()})
		if _, err := conn.WriteToUDPAddrPort(b, stray); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "a stray packet at each of the 3 sockets", func() bool { return u.Stray() == 3 })
	u.Close()
	for i, l := range ls {
		if l.Received != uint64(i+1) || l.Foreign != 0 || l.Unstamped != 0 {
			t.Errorf("listener %d: received %d (want %d), foreign %d, unstamped %d", i, l.Received, i+1, l.Foreign, l.Unstamped)
		}
	}
	if u.Stray() != 3 {
		t.Errorf("stray %d, want 3", u.Stray())
	}
}

func TestListenUDPRefusesNonLoopback(t *testing.T) {
	if _, err := ListenUDP(netip.MustParseAddr("10.0.0.1"), []*Listener{{}}, 1, 0, NewClock()); err == nil {
		t.Fatal("accepted a base outside 127.0.0.0/8")
	}
	if _, err := ListenUDP(netip.MustParseAddr("127.255.255.255"), []*Listener{{}, {}}, 1, 0, NewClock()); err == nil {
		t.Fatal("accepted listeners past 127.255.255.255")
	}
}
