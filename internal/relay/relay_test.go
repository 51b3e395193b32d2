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

// call sets up a call between endpoints a (caller) and b (callee) and
// returns the relay addresses each must send to.
func setupCall(t *testing.T, r *Relay, id string, a, b *endpoint) (toRelayA, toRelayB netip.AddrPort) {
	t.Helper()
	offer, err := r.Offer(id, "tag-a", offerSDP(a.addr()), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer(id, "tag-a", "tag-b", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	return relayPort(t, answer), relayPort(t, offer)
}

func TestRelayBothWays(t *testing.T) { bothPaths(t, testRelayBothWays) }

func testRelayBothWays(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	toA, toB := setupCall(t, r, "both-ways", a, b)
	if toA == toB {
		t.Fatalf("both sides got relay address %s", toA)
	}
	for i := range 20 {
		pa := rtpPacket(uint16(i), bytes.Repeat([]byte{byte(i)}, 160))
		a.send(toA, pa)
		got, from := b.recv()
		if !bytes.Equal(got, pa) {
			t.Fatalf("b got %x, want %x", got, pa)
		}
		if from != toB {
			t.Fatalf("b got the packet from %s, want the relay port it sends to (%s): symmetric RTP", from, toB)
		}
		pb := rtpPacket(uint16(1000+i), bytes.Repeat([]byte{0xff - byte(i)}, 160))
		b.send(toB, pb)
		got, from = a.recv()
		if !bytes.Equal(got, pb) || from != toA {
			t.Fatalf("a got %x from %s, want %x from %s", got, from, pb, toA)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "40 counted", func() bool { return r.Stats().PacketsOut == 40 })
	st := r.Stats()
	if st.PacketsIn != 40 || st.PacketsOut != 40 || st.Dropped() != 0 || st.ActiveCalls != 1 {
		t.Errorf("stats %+v, want 40 in, 40 out, no drops, 1 call", st)
	}
	if st.BytesOut != 40*172 {
		t.Errorf("bytes out %d, want %d", st.BytesOut, 40*172)
	}
	// On the fast path the first packet each way latches its sender in user
	// space, and a's flow is rebuilt once b has latched; the kernel does the
	// rest.
	if st.Kernel && st.KernelPackets < 36 {
		t.Errorf("the kernel forwarded %d of 40 packets, want at least 36", st.KernelPackets)
	}
}

func TestRelayRTCP(t *testing.T) { bothPaths(t, testRelayRTCP) }

func testRelayRTCP(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	aRTCP := newEndpoint(t)
	offer, err := r.Offer("rtcp", "ta", offerSDP(a.addr(), fmt.Sprintf("a=rtcp:%d", aRTCP.addr().Port())), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(offer, fmt.Appendf(nil, "a=rtcp:%d IN IP4 127.0.0.1", relayPort(t, offer).Port()+1)) {
		t.Fatalf("a=rtcp not rewritten to the relay's RTCP port:\n%s", offer)
	}
	// b multiplexes RTCP on its RTP port (RFC 5761).
	answer, err := r.Answer("rtcp", "ta", "tb", offerSDP(b.addr(), "a=rtcp-mux"), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	toA, toB := relayPort(t, answer), relayPort(t, offer)
	rr := []byte{0x81, 201, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	// a's RTCP to the relay's RTCP port reaches b muxed on its RTP port.
	aRTCP.send(netip.AddrPortFrom(toA.Addr(), toA.Port()+1), rr)
	if got, from := b.recv(); !bytes.Equal(got, rr) || from != toB {
		t.Fatalf("b got %x from %s, want the RR from %s", got, from, toB)
	}
	// b's muxed RTCP reaches a's RTCP port, from the relay's RTCP port.
	b.send(toB, rr)
	if got, from := aRTCP.recv(); !bytes.Equal(got, rr) || from.Port() != toA.Port()+1 {
		t.Fatalf("a's RTCP port got %x from %s, want the RR from port %d", got, from, toA.Port()+1)
	}
	// and b's RTP still goes to a's RTP port.
	p := rtpPacket(1, []byte("x"))
	b.send(toB, p)
	if got, _ := a.recv(); !bytes.Equal(got, p) {
		t.Fatalf("a got %x, want %x", got, p)
	}
}

// A party behind NAT announces an address it cannot be reached at; the relay
// learns the real one from its first packet.
func TestRelayLatching(t *testing.T) { bothPaths(t, testRelayLatching) }

func testRelayLatching(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	private := netip.MustParseAddrPort("127.0.0.1:9") // discard: nobody reads it
	offer, err := r.Offer("nat", "ta", offerSDP(private), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer("nat", "ta", "tb", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	toA, toB := relayPort(t, answer), relayPort(t, offer)

	// Before a speaks, b's packets go to the announced address.
	b.send(toB, rtpPacket(1, []byte("lost")))
	testutil.WaitFor(t, 10*time.Second, "b's first packet relayed", func() bool { return r.Stats().PacketsOut == 1 })

	p := rtpPacket(2, []byte("from a"))
	a.send(toA, p)
	if got, _ := b.recv(); !bytes.Equal(got, p) {
		t.Fatalf("b got %x, want %x", got, p)
	}
	p = rtpPacket(3, []byte("to a, latched"))
	b.send(toB, p)
	if got, from := a.recv(); !bytes.Equal(got, p) || from != toA {
		t.Fatalf("a got %x from %s, want %x from %s", got, from, p, toA)
	}

	// Another source speaking for a is dropped; a itself still gets through.
	intruder := newEndpointOn(t, "127.0.0.66")
	intruder.send(toA, rtpPacket(4, []byte("intruder")))
	testutil.WaitFor(t, 10*time.Second, "intruder dropped", func() bool { return r.Stats().Drops["source"] == 1 })
	p = rtpPacket(5, []byte("a again"))
	a.send(toA, p)
	if got, _ := b.recv(); !bytes.Equal(got, p) {
		t.Fatalf("b got %x, want a's packet %x (the intruder's must be dropped)", got, p)
	}

	// A re-INVITE from a with the same SDP keeps the latched address.
	reoffer, err := r.Offer("nat", "ta", offerSDP(private), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if relayPort(t, reoffer) != toB {
		t.Fatalf("re-offer moved b's relay port from %s to %s", toB, relayPort(t, reoffer))
	}
	p = rtpPacket(6, []byte("still latched"))
	b.send(toB, p)
	if got, _ := a.recv(); !bytes.Equal(got, p) {
		t.Fatalf("a got %x, want %x", got, p)
	}
}

func TestRelayReofferKeepsPorts(t *testing.T) { bothPaths(t, testRelayReofferKeepsPorts) }

func testRelayReofferKeepsPorts(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	toA, toB := setupCall(t, r, "reinvite", a, b)
	free := r.Stats().FreePorts

	// The caller re-offers (say, hold and resume), then the callee does.
	again, err := r.Offer("reinvite", "tag-a", offerSDP(a.addr(), "a=sendonly"), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if got := relayPort(t, again); got != toB {
		t.Errorf("caller's re-offer points b at %s, want %s", got, toB)
	}
	ans, err := r.Answer("reinvite", "tag-a", "tag-b", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if got := relayPort(t, ans); got != toA {
		t.Errorf("answer to the re-offer points a at %s, want %s", got, toA)
	}
	fromB, err := r.Offer("reinvite", "tag-b", offerSDP(b.addr()), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if got := relayPort(t, fromB); got != toA {
		t.Errorf("callee's re-offer points a at %s, want %s", got, toA)
	}
	if _, err := r.Answer("reinvite", "tag-b", "tag-a", offerSDP(a.addr()), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if f := r.Stats().FreePorts; f != free {
		t.Errorf("re-INVITEs took ports: %d free pairs, had %d", f, free)
	}
	p := rtpPacket(1, []byte("after re-invite"))
	a.send(toA, p)
	if got, _ := b.recv(); !bytes.Equal(got, p) {
		t.Fatalf("b got %x, want %x", got, p)
	}
	if _, err := r.Offer("reinvite", "tag-c", offerSDP(a.addr()), "", netip.Addr{}); err == nil {
		t.Error("an offer with a third party's tag was accepted")
	}
}

func TestRelayDeleteReleasesPorts(t *testing.T) { bothPaths(t, testRelayDeleteReleasesPorts) }

func testRelayDeleteReleasesPorts(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	free := r.Stats().FreePorts
	toA, toB := setupCall(t, r, "del", a, b)
	if canBind(int(toA.Port())) || canBind(int(toB.Port())+1) {
		t.Fatal("relay ports are not bound during the call")
	}
	if f := r.Stats().FreePorts; f != free-2 {
		t.Fatalf("%d free port pairs during a one-stream call, want %d", f, free-2)
	}
	// Media both ways, so that on the fast path both flows are in the kernel.
	for i := range 3 {
		a.send(toA, rtpPacket(uint16(i), []byte("a")))
		b.recv()
		b.send(toB, rtpPacket(uint16(i), []byte("b")))
		a.recv()
	}
	if st := r.Stats(); st.Kernel && st.KernelFlows != 2 {
		t.Fatalf("%d flows in the kernel during the call, want 2", st.KernelFlows)
	}
	if err := r.Delete("del"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []uint16{toA.Port(), toA.Port() + 1, toB.Port(), toB.Port() + 1} {
		if !canBind(int(p)) {
			t.Errorf("port %d still bound after Delete", p)
		}
	}
	if st := r.Stats(); st.FreePorts != free || st.ActiveCalls != 0 || st.KernelFlows != 0 {
		t.Errorf("after Delete: %d free pairs (want %d), %d calls, %d kernel flows", st.FreePorts, free, st.ActiveCalls, st.KernelFlows)
	}
	if err := r.Delete("del"); !errors.Is(err, ErrUnknownCall) {
		t.Errorf("second Delete: %v, want ErrUnknownCall", err)
	}
	if _, err := r.Answer("del", "tag-a", "tag-b", offerSDP(b.addr()), netip.Addr{}); !errors.Is(err, ErrUnknownCall) {
		t.Errorf("Answer after Delete: %v, want ErrUnknownCall", err)
	}
}

func TestRelayTimeoutReleasesPorts(t *testing.T) { bothPaths(t, testRelayTimeoutReleasesPorts) }

func testRelayTimeoutReleasesPorts(t *testing.T) {
	r := newTestRelay(t, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	a, b := newEndpoint(t), newEndpoint(t)
	free := r.Stats().FreePorts
	toA, _ := setupCall(t, r, "quiet", a, b)
	testutil.WaitFor(t, 10*time.Second, "the silent call to time out", func() bool { return r.Calls() == 0 })
	testutil.WaitFor(t, 10*time.Second, "its ports back in the pool", func() bool { return r.Stats().FreePorts == free })
	if st := r.Stats(); st.Timeouts != 1 {
		t.Errorf("after timeout: %d timeouts, want 1", st.Timeouts)
	}
	testutil.WaitFor(t, 10*time.Second, "the timed-out call's port to be closed", func() bool { return canBind(int(toA.Port())) })
}

// Packets keep a call alive past its timeout. The relay's clock is the
// test's: the sweeps see exactly the times the test gives them, however
// slowly the machine runs.
func TestRelayMediaKeepsCallAlive(t *testing.T) { bothPaths(t, testRelayMediaKeepsCallAlive) }

func testRelayMediaKeepsCallAlive(t *testing.T) {
	clock := newFakeClock()
	const timeout = time.Minute
	r := newTestRelay(t, func(o *Options) { o.Timeout, o.clock = timeout, clock.now })
	a, b := newEndpoint(t), newEndpoint(t)
	toA, _ := setupCall(t, r, "talking", a, b)
	// Talk for several timeouts: before every sweep a packet has moved.
	for i := range 6 {
		a.send(toA, rtpPacket(uint16(i), []byte("talk")))
		b.recv()
		testutil.WaitFor(t, 10*time.Second, "the packet counted", func() bool { return callPackets(r, "talking") > uint64(i) })
		clock.advance(timeout * 9 / 10)
		r.expire(clock.now())
		if r.Calls() != 1 {
			t.Fatalf("after %d timeouts' worth of talking, the media timeout ended the call", i+1)
		}
	}
	// Silence for a whole timeout ends it.
	clock.advance(timeout)
	r.expire(clock.now())
	if r.Calls() != 0 {
		t.Fatal("a call silent for the timeout was not ended")
	}
}

func TestRelayBadInput(t *testing.T) { bothPaths(t, testRelayBadInput) }

func testRelayBadInput(t *testing.T) {
	r := newTestRelay(t, nil)
	a, b := newEndpoint(t), newEndpoint(t)
	toA, _ := setupCall(t, r, "bad", a, b)
	bad := map[string][]byte{
		"not_rtp":   []byte("GET / HTTP/1.0\r\n\r\n"),
		"truncated": {0x80, 0, 0, 1},
		"oversize":  append([]byte{0x80, 0}, make([]byte, 9000)...),
	}
	for reason, p := range bad {
		a.send(toA, p)
		testutil.WaitFor(t, 10*time.Second, reason+" drop", func() bool { return r.Stats().Drops[reason] == 1 })
	}
	a.send(toA, []byte{0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 99}[:12+1]) // CSRC count 0, fine
	p := rtpPacket(7, []byte("good"))
	a.send(toA, p)
	got, _ := b.recv()
	if len(got) != 13 {
		t.Fatalf("b got %x first, want the 13-byte packet", got)
	}
	if got, _ = b.recv(); !bytes.Equal(got, p) {
		t.Fatalf("b got %x, want %x", got, p)
	}
	// The counters are added after the send returns: wait for them.
	testutil.WaitFor(t, 10*time.Second, "2 relayed", func() bool { return r.Stats().PacketsOut == 2 })
	if st := r.Stats(); st.Dropped() != 3 {
		t.Errorf("stats %+v: want 3 dropped", st)
	}
}

func TestRelayBadControl(t *testing.T) {
	r := newTestRelay(t, nil)
	for _, body := range []string{"", "hello", "v=0\r\n", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"} {
		if _, err := r.Offer("x", "t", []byte(body), "", netip.Addr{}); err == nil {
			t.Errorf("Offer accepted %q", body)
		}
	}
	if r.Calls() != 0 {
		t.Errorf("%d calls after bad offers", r.Calls())
	}
	if _, err := r.Offer("", "t", offerSDP(netip.MustParseAddrPort("127.0.0.1:4000")), "", netip.Addr{}); err == nil {
		t.Error("Offer without call-id accepted")
	}
	if _, err := New(Options{Addr: "0.0.0.0", PortMin: 1000, PortMax: 2000}); err == nil {
		t.Error("New accepted an unspecified address")
	}
	if _, err := New(Options{Addr: "127.0.0.1", PortMin: 2000, PortMax: 1000}); err == nil {
		t.Error("New accepted a reversed port range")
	}
}

func TestRelayRunsOutOfPorts(t *testing.T) {
	r := newTestRelay(t, func(o *Options) { o.PortMax = o.PortMin + 7 }) // 4 pairs: two calls
	sdp := offerSDP(netip.MustParseAddrPort("127.0.0.1:4000"))
	n := 0
	for i := range 4 {
		if _, err := r.Offer(fmt.Sprint("c", i), "t", sdp, "", netip.Addr{}); err != nil {
			if !errors.Is(err, ErrNoPorts) {
				t.Fatal(err)
			}
			continue
		}
		n++
	}
	if n > 2 || n == 0 {
		t.Fatalf("%d calls fit in 4 port pairs, want 1 or 2 (busy ports are skipped)", n)
	}
	if r.Calls() != n {
		t.Fatalf("%d calls kept, want %d: a failed offer must not leave a call", r.Calls(), n)
	}
	if err := r.Delete("c0"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Offer("again", "t", sdp, "", netip.Addr{}); err != nil {
		t.Fatalf("ports freed by Delete were not reused: %v", err)
	}
}
