package relay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/sdp/v3"

	"github.com/convene/convene/internal/testutil"
)

// testPortBase spreads each test binary's relays over its own part of a high range so
// parallel test binaries rarely meet; a busy port is skipped anyway.
var testPortBase = 20000 + (os.Getpid()%200)*100

// newTestRelay opens a relay on 127.0.0.1; within bothPaths' "kernel"
// subtest, with the kernel fast path, which must then have loaded.
func newTestRelay(t testing.TB, mod func(*Options)) *Relay {
	t.Helper()
	o := Options{Addr: "127.0.0.1", PortMin: testPortBase, PortMax: testPortBase + 99, Timeout: time.Minute}
	o.Kernel = strings.HasSuffix(t.Name(), "/kernel") || strings.Contains(t.Name(), "/kernel/")
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if o.Kernel && !r.Stats().Kernel {
		t.Fatal("the kernel fast path did not load (running as root)")
	}
	return r
}

// bothPaths runs test with the relay forwarding in user space, then with
// the kernel fast path (as root only: loading eBPF needs it; CI is root).
func bothPaths(t *testing.T, test func(*testing.T)) {
	t.Run("user", test)
	t.Run("kernel", func(t *testing.T) {
		testutil.NeedRoot(t, "the kernel fast path")
		test(t)
	})
}

// endpoint is a test party: a UDP socket standing for a phone's RTP port.
type endpoint struct {
	t    testing.TB
	conn *net.UDPConn
}

func newEndpoint(t testing.TB) *endpoint { return newEndpointOn(t, "127.0.0.1") }

// newEndpointOn is an endpoint on another loopback address, such as a third
// party's (127.0.0.66): not the IP any test SDP announces. Its port is
// never one of the test relays' (testPortBase on): the kernel's ephemeral
// range can reach into theirs, and an endpoint there would take a port a
// relay wants, or receive a spray meant for the relay's ports itself.
func newEndpointOn(t testing.TB, ip string) *endpoint {
	t.Helper()
	for range 20 {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
		if err != nil {
			t.Fatal(err)
		}
		if p := c.LocalAddr().(*net.UDPAddr).Port; p >= testPortBase && p <= testPortBase+199 {
			defer c.Close() // held until another port is found
			continue
		}
		t.Cleanup(func() { c.Close() })
		return &endpoint{t: t, conn: c}
	}
	t.Fatal("no ephemeral UDP port outside the relays' range")
	return nil
}

func (e *endpoint) addr() netip.AddrPort { return e.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (e *endpoint) send(to netip.AddrPort, b []byte) {
	e.t.Helper()
	if _, err := e.conn.WriteToUDPAddrPort(b, to); err != nil {
		e.t.Fatal(err)
	}
}

// recv returns the next datagram, or fails the test after a generous
// deadline (a liveness bound, not a timing assertion).
func (e *endpoint) recv() ([]byte, netip.AddrPort) {
	e.t.Helper()
	b, from, err := e.tryRecv(10 * time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, from
}

func (e *endpoint) tryRecv(d time.Duration) ([]byte, netip.AddrPort, error) {
	buf := make([]byte, 4096)
	_ = e.conn.SetReadDeadline(time.Now().Add(d))
	n, from, err := e.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, from, err
	}
	return buf[:n], from, nil
}

// offerSDP is a typical phone's audio offer for RTP on ap.
func offerSDP(ap netip.AddrPort, extra ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v=0\r\no=- 1 1 IN IP4 %s\r\ns=-\r\nc=IN IP4 %s\r\nt=0 0\r\n", ap.Addr(), ap.Addr())
	fmt.Fprintf(&b, "m=audio %d RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n", ap.Port())
	for _, e := range extra {
		b.WriteString(e + "\r\n")
	}
	b.WriteString("a=sendrecv\r\n")
	return b.Bytes()
}

// mediaPorts returns the c= address and m= ports of an SDP body.
func mediaPorts(t testing.TB, body []byte) (string, []int) {
	t.Helper()
	var s sdp.SessionDescription
	if err := s.Unmarshal(body); err != nil {
		t.Fatalf("rewritten SDP does not parse: %v\n%s", err, body)
	}
	addr := ""
	if s.ConnectionInformation != nil {
		addr = s.ConnectionInformation.Address.Address
	}
	var ports []int
	for _, m := range s.MediaDescriptions {
		ports = append(ports, m.MediaName.Port.Value)
		if m.ConnectionInformation != nil {
			addr = m.ConnectionInformation.Address.Address
		}
	}
	return addr, ports
}

// relayPort is the first m= port of a rewritten body, as an address.
func relayPort(t testing.TB, body []byte) netip.AddrPort {
	t.Helper()
	addr, ports := mediaPorts(t, body)
	if addr != "127.0.0.1" || len(ports) == 0 || ports[0] == 0 {
		t.Fatalf("rewritten SDP points at %s %v, want 127.0.0.1 and a port:\n%s", addr, ports, body)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(ports[0]))
}

// rtpPacket is a PCMU packet with the given sequence number and payload.
func rtpPacket(seq uint16, payload []byte) []byte {
	b := make([]byte, 12, 12+len(payload))
	b[0], b[1] = 0x80, 0
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*160)
	binary.BigEndian.PutUint32(b[8:], 0x11223344)
	return append(b, payload...)
}

// canBind reports whether the UDP port on 127.0.0.1 is free.
func canBind(port int) bool {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func listenAt(port uint16) (*net.UDPConn, error) {
	return net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
}

// fakeClock is a relay clock the test moves by hand (Options.clock).
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// callPackets returns what the relay counted for call id (the workers' and,
// after a poll, the kernel's).
func callPackets(r *Relay, id string) uint64 {
	r.kpoll()
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.calls[id]; c != nil {
		return c.packets.Load()
	}
	return 0
}
