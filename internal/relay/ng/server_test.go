package ng

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/relay"
)

func startServer(t *testing.T) (*relay.Relay, *Server, *Client) {
	t.Helper()
	r, err := relay.New(relay.Options{Addr: "127.0.0.1", PortMin: 25000, PortMax: 25999, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := Listen("127.0.0.1:0", r, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return r, s, c
}

func sdpFor(ap netip.AddrPort) []byte {
	return []byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 " + ap.Addr().String() + "\r\nt=0 0\r\n" +
		"m=audio " + strconv.Itoa(int(ap.Port())) + " RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
}

func TestServerCall(t *testing.T) {
	r, _, c := startServer(t)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	offer, err := c.Offer("ng-call", "ta", sdpFor(a.LocalAddr().(*net.UDPAddr).AddrPort()), map[string]any{"flags": []string{"trust-address"}})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := c.Answer("ng-call", "ta", "tb", sdpFor(b.LocalAddr().(*net.UDPAddr).AddrPort()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(offer, []byte("c=IN IP4 127.0.0.1")) || !bytes.Contains(answer, []byte("m=audio ")) {
		t.Fatalf("offer:\n%s\nanswer:\n%s", offer, answer)
	}
	if r.Calls() != 1 {
		t.Fatalf("%d calls", r.Calls())
	}
	if err := c.Delete("ng-call"); err != nil {
		t.Fatal(err)
	}
	if r.Calls() != 0 {
		t.Fatalf("%d calls after delete", r.Calls())
	}
	if err := c.Delete("ng-call"); err == nil || !strings.Contains(err.Error(), "unknown call") {
		t.Errorf("second delete: %v", err)
	}
}

func TestServerBadRequests(t *testing.T) {
	_, s, c := startServer(t)
	if _, err := c.Do(map[string]any{"command": "frobnicate"}); err == nil || !strings.Contains(err.Error(), "Unrecognized") {
		t.Errorf("unknown command: %v", err)
	}
	if _, err := c.Do(map[string]any{"command": "offer", "call-id": "x"}); err == nil {
		t.Error("offer without sdp accepted")
	}
	if _, err := c.Do(map[string]any{"command": "offer", "call-id": "x", "from-tag": "a", "sdp": "nonsense"}); err == nil {
		t.Error("offer with bad sdp accepted")
	}
	// Raw garbage: a reply with an error if there is a cookie, silence if
	// not; the server keeps serving either way.
	conn, err := net.DialUDP("udp", nil, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, m := range []string{"nocookie", "ck d7:command", "ck i42e"} {
		if _, err := conn.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1500)
	for range 2 {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		ck, resp, err := ParseMessage(buf[:n])
		if err != nil || ck != "ck" || resp["result"] != "error" {
			t.Errorf("reply %q: %v", buf[:n], err)
		}
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	if s.BadRequests() != 3 {
		t.Errorf("%d bad requests counted, want 3", s.BadRequests())
	}
}

// An offer's "received from" is the signalling source the relay caps
// streams by: a second call from the same source over the cap is refused,
// one from another source is not.
func TestServerReceivedFromIsCapped(t *testing.T) {
	r, err := relay.New(relay.Options{Addr: "127.0.0.1", PortMin: 26000, PortMax: 26099, Timeout: time.Minute,
		MaxStreamsPerSource: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := Listen("127.0.0.1:0", r, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sdp := sdpFor(netip.MustParseAddrPort("192.0.2.9:4000"))
	from := func(ip string) map[string]any { return map[string]any{"received from": []string{"IP4", ip}} }
	if _, err := c.Offer("one", "t", sdp, from("192.0.2.9")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Offer("two", "t", sdp, from("192.0.2.9")); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("second call from the same source: %v, want the stream limit", err)
	}
	if _, err := c.Offer("three", "t", sdp, from("198.51.100.1")); err != nil {
		t.Fatalf("a call from another source: %v", err)
	}
	if _, err := c.Offer("four", "t", sdp, map[string]any{"received from": []string{"IP6", "192.0.2.9"}}); err != nil {
		t.Fatalf("a malformed received-from counts as unknown: %v", err)
	}
	if st := r.Stats(); st.Refused["source"] != 1 || r.Calls() != 3 {
		t.Fatalf("refusals %v, %d calls; want 1 by source, 3 calls", st.Refused, r.Calls())
	}
}
