package relay

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// Attacks of issue 11 on the relay, each performed against a real relay with
// real sockets, and the legitimate use beside it.

// multiSDP is an offer of n audio m= lines, RTP on ap's port, +2, +4, ...
func multiSDP(ap netip.AddrPort, n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v=0\r\no=- 1 1 IN IP4 %s\r\ns=-\r\nc=IN IP4 %s\r\nt=0 0\r\n", ap.Addr(), ap.Addr())
	for i := range n {
		fmt.Fprintf(&b, "m=audio %d RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n", int(ap.Port())+2*i)
	}
	return b.Bytes()
}

// talk checks that media flows both ways between a and b through the relay.
func talk(t *testing.T, a, b *endpoint, toA, toB netip.AddrPort) {
	t.Helper()
	for i := range 3 {
		p := rtpPacket(uint16(i), []byte("caller"))
		a.send(toA, p)
		if got, _ := b.recv(); !bytes.Equal(got, p) {
			t.Fatalf("callee got %x, want the caller's %x", got, p)
		}
		p = rtpPacket(uint16(100+i), []byte("callee"))
		b.send(toB, p)
		if got, _ := a.recv(); !bytes.Equal(got, p) {
			t.Fatalf("caller got %x, want the callee's %x", got, p)
		}
	}
}

// Issue 11 item 2: offers with 8 m= lines each from one source, as an
// attacker's UPDATEs were, must not empty the port range: the per-call cap
// refuses them outright, and where the operator allows bigger calls, the
// per-source and per-user caps stop the second one. Another party's normal
// call still gets ports and media.
func TestOffersCannotEmptyTheRange(t *testing.T) {
	evil := netip.MustParseAddr("192.0.2.66")
	sdp8 := multiSDP(netip.MustParseAddrPort("192.0.2.66:4000"), 8)
	cases := []struct {
		name string
		mod  func(*Options)
		user string
		cap  string
	}{
		{"per call", nil, "", "call"},
		{"per source", func(o *Options) { o.MaxStreamsPerCall, o.MaxStreamsPerSource = 8, 8 }, "", "source"},
		{"per user", func(o *Options) { o.MaxStreamsPerCall, o.MaxStreamsPerUser = 8, 8 }, "mallory", "user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRelay(t, tc.mod) // 50 port pairs: 25 streams
			free := r.Stats().FreePorts
			ok := 0
			for i := range 2 {
				src := evil
				if tc.user != "" {
					src = netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)}) // the user moves; the cap follows the user
				}
				_, err := r.Offer(fmt.Sprint("evil-", i), "t", sdp8, tc.user, src)
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, ErrLimit):
					t.Fatalf("offer %d: %v, want ErrLimit", i, err)
				}
			}
			st := r.Stats()
			if ok > 1 || st.Refused[tc.cap] != uint64(2-ok) {
				t.Fatalf("%d of 2 eight-stream offers accepted; refusals %v, want %d by the %s cap", ok, st.Refused, 2-ok, tc.cap)
			}
			if used := free - st.FreePorts; used != ok*16 {
				t.Fatalf("%d port pairs taken, want %d: a refused offer must allocate nothing", used, ok*16)
			}
			if r.Calls() != ok {
				t.Fatalf("%d calls kept, want %d", r.Calls(), ok)
			}
			// A third party's normal call.
			a, b := newEndpoint(t), newEndpoint(t)
			offer, err := r.Offer("honest", "ta", offerSDP(a.addr()), "alice", netip.MustParseAddr("198.51.100.7"))
			if err != nil {
				t.Fatalf("an honest call after the attack: %v", err)
			}
			answer, err := r.Answer("honest", "ta", "tb", offerSDP(b.addr()), netip.Addr{})
			if err != nil {
				t.Fatal(err)
			}
			talk(t, a, b, relayPort(t, answer), relayPort(t, offer))
			// Ending the calls gives their streams back to the caps.
			for i := range ok {
				if err := r.Delete(fmt.Sprint("evil-", i)); err != nil {
					t.Fatal(err)
				}
			}
			r.mu.Lock()
			users, sources := len(r.users), len(r.sources)
			r.mu.Unlock()
			if users != 1 || sources != 1 { // alice's call is still up
				t.Fatalf("after Delete: %d users and %d sources hold streams, want only the honest call's", users, sources)
			}
		})
	}
}

// A re-offer that adds streams beyond the call's cap is refused and leaves
// the call as it was.
func TestReofferOverCallCap(t *testing.T) {
	r := newTestRelay(t, func(o *Options) { o.MaxStreamsPerCall = 2 })
	a, b := newEndpoint(t), newEndpoint(t)
	toA, toB := setupCall(t, r, "grow", a, b)
	free := r.Stats().FreePorts
	if _, err := r.Offer("grow", "tag-a", multiSDP(a.addr(), 3), "", netip.Addr{}); !errors.Is(err, ErrLimit) {
		t.Fatalf("re-offer of 3 streams in a call capped at 2: %v, want ErrLimit", err)
	}
	if f := r.Stats().FreePorts; f != free {
		t.Fatalf("the refused re-offer took %d port pairs", free-f)
	}
	talk(t, a, b, toA, toB)
}

// Issue 11 item 3: a third party who never signalled sends to the caller's
// relay port (read from the SDP answer), to the ports next to it, and to
// every other port of the range, before and after the caller speaks. It
// receives none of the callee's audio, which all reaches the caller; the
// refused packets are counted.
func TestThirdPartyCannotHijackMedia(t *testing.T) { bothPaths(t, testThirdPartyCannotHijackMedia) }

func testThirdPartyCannotHijackMedia(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	evil := newEndpointOn(t, "127.0.0.66")
	toA, toB := setupCall(t, r, "victim", a, b)
	spray := func(seq uint16) int {
		n := 0
		for port := r.o.PortMin; port <= r.o.PortMax; port++ {
			evil.send(netip.AddrPortFrom(toA.Addr(), uint16(port)), rtpPacket(seq, []byte("hello?")))
			n++
		}
		return n
	}
	// First: before anyone speaks, at the answer's port, its neighbours, and all the others.
	evil.send(toA, rtpPacket(1, []byte("me first")))
	evil.send(netip.AddrPortFrom(toA.Addr(), toA.Port()+2), rtpPacket(1, []byte("next port")))
	n := 2 + spray(2)
	// The callee talks: nothing of it reaches the third party, all of it the caller.
	for i := range 5 {
		p := rtpPacket(uint16(10+i), []byte("callee's secret"))
		b.send(toB, p)
		if got, _ := a.recv(); !bytes.Equal(got, p) {
			t.Fatalf("caller got %x, want the callee's %x", got, p)
		}
	}
	talk(t, a, b, toA, toB)
	// Again, now that the caller has latched.
	n += spray(3)
	p := rtpPacket(50, []byte("callee again"))
	b.send(toB, p)
	if got, _ := a.recv(); !bytes.Equal(got, p) {
		t.Fatalf("caller got %x, want the callee's %x", got, p)
	}
	// Every packet the relay sent went to the caller (checked above); the
	// third party's socket holds nothing.
	if got, from, err := evil.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatalf("the third party received %x from %s", got, from)
	}
	// Of the sprayed packets, those that reached a socket of the call were
	// refused and counted (the others hit ports nobody listens on).
	testutil.WaitFor(t, 10*time.Second, "the third party's packets counted as refused", func() bool {
		d := r.Stats().Drops
		return d["refused_source"]+d["source"] >= 4
	})
	if d := r.Stats().Drops; d["refused_source"] == 0 || d["source"] == 0 {
		t.Errorf("drops %v: want the packets before the latch as refused_source, after it as source (of %d sent)", d, n)
	}
}

// A party behind NAT announces a private address; within the learning
// window the relay latches onto where its packets really come from, and
// never moves to another IP after that. Once the window has passed, an
// unlatched side is not learnt any more.
func TestNATLatchWindow(t *testing.T) { bothPaths(t, testNATLatchWindow) }

func testNATLatchWindow(t *testing.T) {
	clock := newFakeClock()
	const window = 3 * time.Second
	r := newTestRelay(t, func(o *Options) { o.LatchWindow, o.clock = window, clock.now })
	a, b := newEndpoint(t), newEndpoint(t)
	evil := newEndpointOn(t, "127.0.0.66")
	private := netip.MustParseAddrPort("10.11.12.13:4000")

	offer, err := r.Offer("nat", "ta", offerSDP(private), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer("nat", "ta", "tb", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	toA, toB := relayPort(t, answer), relayPort(t, offer)
	clock.advance(window / 2)
	talk(t, a, b, toA, toB) // a speaks first, within the window: learnt

	// Still within the window, another IP may not take a's place.
	evil.send(toA, rtpPacket(7, []byte("take over")))
	testutil.WaitFor(t, 10*time.Second, "the take-over refused", func() bool { return r.Stats().Drops["source"] == 1 })
	clock.advance(window)
	evil.send(toA, rtpPacket(8, []byte("take over later")))
	testutil.WaitFor(t, 10*time.Second, "the later take-over refused", func() bool { return r.Stats().Drops["source"] == 2 })
	talk(t, a, b, toA, toB)

	// A second call: nobody speaks for the caller until the window is over.
	offer2, err := r.Offer("nat-late", "ta", offerSDP(private), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	answer2, err := r.Answer("nat-late", "ta", "tb", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(window + time.Millisecond)
	evil.send(relayPort(t, answer2), rtpPacket(9, []byte("too late")))
	testutil.WaitFor(t, 10*time.Second, "a source after the window refused", func() bool { return r.Stats().Drops["refused_source"] == 1 })
	// A re-offer opens a new window: now the caller is learnt.
	if _, err := r.Offer("nat-late", "ta", offerSDP(private), "", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	talk(t, a, b, relayPort(t, answer2), relayPort(t, offer2))
}

// The caller's signalling source is an address its media may come from even
// after the learning window (a phone behind NAT sends both from its public
// address).
func TestSignallingSourceMayLatch(t *testing.T) {
	clock := newFakeClock()
	r := newTestRelay(t, func(o *Options) { o.clock = clock.now })
	a, b := newEndpoint(t), newEndpoint(t)
	offer, err := r.Offer("sig", "ta", offerSDP(netip.MustParseAddrPort("10.11.12.13:4000")), "", a.addr().Addr())
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer("sig", "ta", "tb", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	talk(t, a, b, relayPort(t, answer), relayPort(t, offer))
}

// The same for the answerer: the 2xx's signalling source (which the SIP
// proxy passes to Answer) is an address its media may come from after the
// learning window, though its SDP names a private address.
func TestAnswererSignallingSourceMayLatch(t *testing.T) {
	clock := newFakeClock()
	r := newTestRelay(t, func(o *Options) { o.clock = clock.now })
	a, b := newEndpoint(t), newEndpoint(t)
	offer, err := r.Offer("sig-b", "ta", offerSDP(a.addr()), "", a.addr().Addr())
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer("sig-b", "ta", "tb", offerSDP(netip.MustParseAddrPort("10.11.12.14:4000")), b.addr().Addr())
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	// The answerer speaks first: nothing can reach its private address.
	talk(t, b, a, relayPort(t, offer), relayPort(t, answer))
}

// Issue 11 item 3, the fast path: once the call's flows are in the kernel,
// datagrams larger than the maximum size, or whose CSRC count or header
// extension run past the payload, are still dropped and counted as in user
// space, and never reach the callee.
func TestBadPacketsOnTheFastPath(t *testing.T) { bothPaths(t, testBadPacketsOnTheFastPath) }

func testBadPacketsOnTheFastPath(t *testing.T) {
	const maxPacket = 1000
	r := newTestRelay(t, func(o *Options) { o.MaxPacket = maxPacket })
	a, b := newEndpoint(t), newEndpoint(t)
	toA, toB := setupCall(t, r, "bad-fast", a, b)
	talk(t, a, b, toA, toB)
	if st := r.Stats(); st.Kernel && st.KernelFlows != 2 {
		t.Fatalf("%d flows in the kernel, want 2", st.KernelFlows)
	}
	csrc := rtpPacket(1, make([]byte, 20))
	csrc[0] = 0x8f // 15 CSRCs (60 bytes) in a 32-byte packet
	ext := rtpPacket(2, make([]byte, 20))
	ext[0] |= 0x10
	ext[14], ext[15] = 0, 50 // 200 bytes of extension
	bad := []struct {
		reason string
		p      []byte
	}{{"oversize", rtpPacket(3, make([]byte, maxPacket-11))}, {"truncated", csrc}, {"truncated", ext}}
	for i, c := range bad {
		before := r.Stats().Drops[c.reason]
		a.send(toA, c.p)
		testutil.WaitFor(t, 10*time.Second, c.reason+" drop", func() bool { return r.Stats().Drops[c.reason] == before+1 })
		good := rtpPacket(uint16(200+i), []byte("good"))
		a.send(toA, good)
		if got, _ := b.recv(); !bytes.Equal(got, good) {
			t.Fatalf("after a bad packet (%s), callee got %x, want only the good one %x", c.reason, got, good)
		}
	}
	// Exactly the maximum is relayed.
	p := rtpPacket(300, make([]byte, maxPacket-12))
	a.send(toA, p)
	if got, _ := b.recv(); !bytes.Equal(got, p) {
		t.Fatalf("a %d-byte packet was not relayed", len(p))
	}
}
