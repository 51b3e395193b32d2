package sip

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/testutil"
)

// newTestRelay starts the real RTP relay (internal/relay) on a random
// 100-port range.
func newTestRelay(t *testing.T) *relay.Relay {
	t.Helper()
	var r *relay.Relay
	var err error
	for range 5 {
		base := 52000 + 2*rand.IntN(3000)
		// With root (CI), the relay's kernel fast path carries the media,
		// as on a node with its defaults.
		r, err = relay.New(relay.Options{Addr: "127.0.0.1", PortMin: base, PortMax: base + 99, Timeout: time.Minute,
			Kernel: os.Geteuid() == 0})
		if err == nil {
			t.Cleanup(func() { r.Close() })
			return r
		}
	}
	t.Fatal(err)
	return nil
}

// rtpSink counts RTP packets arriving on a UDP port.
type rtpSink struct {
	conn    net.PacketConn
	mu      sync.Mutex
	packets int
	pts     map[byte]int
	sources map[string]int
}

func newRTPSink(t *testing.T) *rtpSink {
	t.Helper()
	var c net.PacketConn
	var err error
	for range 20 {
		// An even port, as SDP implies RTCP on port+1.
		c, err = net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(40000+2*rand.IntN(5000)))
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &rtpSink{conn: c, pts: map[byte]int{}, sources: map[string]int{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 || buf[0]>>6 != 2 {
				continue
			}
			s.mu.Lock()
			s.packets++
			s.pts[buf[1]&0x7f]++
			s.sources[from.String()]++
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close() })
	return s
}

func (s *rtpSink) port() int { return s.conn.LocalAddr().(*net.UDPAddr).Port }

func (s *rtpSink) stats() (int, map[byte]int, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.packets, clone(s.pts), clone(s.sources)
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestSIPpCallThroughRelay: SIPp (alice) calls SIPp (bob) through Convene:
// 407 and auth, Record-Route, ACK and BYE through the proxy, and the RTP
// SIPp plays arrives at bob's media port from the relay, not from alice.
func TestSIPpCallThroughRelay(t *testing.T) {
	sippCall(t, "call_uac.xml", "call_uas.xml")
}

// TestSIPpLateOfferCallThroughRelay: the caller's INVITE has no SDP, the
// callee's 200 brings the offer and the caller's ACK the answer (which the
// callee checks names a relay port); media goes through the relay all the
// same.
func TestSIPpLateOfferCallThroughRelay(t *testing.T) {
	sippCall(t, "call_uac_late.xml", "call_uas_late.xml")
}

func sippCall(t *testing.T, uac, uas string) {
	testutil.NeedBinary(t, "sipp")
	rl := newTestRelay(t)
	e := newTestEnv(t, func(o *Options) { o.Media = rl }, "alice", "bob")
	sink := newRTPSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	uasPort := freeUDPPort(t)
	uasDone := make(chan error, 1)
	var uasOut string
	go func() {
		out, err := runSIPp(t, ctx, "-sf", scenario(uas), "-i", "127.0.0.1", "-p", strconv.Itoa(uasPort),
			"-set", "rtpport", strconv.Itoa(sink.port()), "-m", "1", "-timeout", "40s", "-nostdin")
		uasOut = out
		uasDone <- err
	}()
	if out, err := runSIPp(t, ctx, "-sf", scenario("reg_contact.xml"), "-i", "127.0.0.1", "-p", strconv.Itoa(freeUDPPort(t)),
		"-s", "bob", "-au", "bob", "-ap", testPassword, "-set", "cport", strconv.Itoa(uasPort), "-m", "1",
		"-timeout", "10s", "-nostdin", e.srv.Addr()); err != nil {
		t.Fatalf("register bob: %v\n%s", err, out)
	}
	out, err := runSIPp(t, ctx, "-sf", scenario(uac), "-i", "127.0.0.1", "-p", strconv.Itoa(freeUDPPort(t)),
		"-mp", strconv.Itoa(44000+2*rand.IntN(2000)), "-s", "bob", "-au", "alice", "-ap", testPassword, "-auth_uri", "bob@convene.test",
		"-set", "domain", "convene.test", "-m", "1", "-timeout", "30s", "-nostdin", e.srv.Addr())
	if err != nil {
		cancel()
		<-uasDone
		t.Fatalf("caller: %v\n%s\n--- callee ---\n%s", err, out, uasOut)
	}
	if err := <-uasDone; err != nil {
		t.Fatalf("callee: %v\n%s", err, uasOut)
	}

	n, pts, sources := sink.stats()
	t.Logf("bob got %d RTP packets (payload types %v) from %v", n, pts, sources)
	if n < 20 {
		t.Fatalf("bob's media port got %d RTP packets, want at least 20 (1.5 s of 20 ms G.711)", n)
	}
	if pts[8] != n {
		t.Errorf("payload types %v, want all 8 (PCMA)", pts)
	}
	for src := range sources {
		host, port := splitHostPort(src)
		if host != "127.0.0.1" || port < 52000 || port > 58099 {
			t.Errorf("RTP came from %s, want the relay's port range", src)
		}
	}
	if got := counter(t, e.reg, "convene_sip_calls_total", map[string]string{"result": "answered"}); got != 1 {
		t.Errorf("answered calls = %v, want 1", got)
	}
	// The BYE released the relay's ports.
	deadline := time.Now().Add(5 * time.Second)
	for rl.Calls() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c := rl.Calls(); c != 0 {
		t.Errorf("relay still holds %d calls after BYE", c)
	}
	if got := counter(t, e.reg, "convene_sip_calls_active", nil); got != 0 {
		t.Errorf("active calls = %v after BYE, want 0", got)
	}
}
