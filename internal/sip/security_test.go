package sip

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/testutil"
)

// Each test here performs one attack of issue 11 against a real Server
// and checks that it fails, and that the legitimate use still works.

// inDialogRaw is an in-dialog request as an attacker writes it: a To-tag,
// a Route naming the proxy (with the given token, "" for none) and a
// Request-URI anywhere.
func inDialogRaw(p *phone, method, ruri, route, callID string, body string) string {
	return method + " " + ruri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bK" + method +
		strconv.FormatInt(time.Now().UnixNano(), 36) + ";rport\r\nMax-Forwards: 70\r\nRoute: <" + route + ">\r\n" +
		"From: <sip:mallory@convene.test>;tag=m1\r\nTo: <sip:victim@convene.test>;tag=v1\r\n" +
		"Call-ID: " + callID + "\r\nCSeq: 7 " + method + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestForgedInDialogRequestsAreNotRouted: item 1 (open relay). Requests
// with a To-tag and a Route naming the node, but no dialog token the node
// signed, are refused; nothing reaches the UDP or TCP target they name,
// and no TCP connection is opened.
func TestForgedInDialogRequestsAreNotRouted(t *testing.T) {
	e := newTestEnv(t, nil)
	victim, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	var udpGot atomic.Int32
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, _, err := victim.ReadFrom(buf); err != nil {
				return
			}
			udpGot.Add(1)
		}
	}()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	mallory := newPhone(t, "mallory", e.srv.Addr())
	route := "sip:" + e.srv.Addr() + ";lr"
	forged := "sip:" + e.srv.Addr() + ";lr;cv=AAAAAAAAAAAAAAAA"
	cases := []struct{ method, ruri, route string }{
		{"MESSAGE", "sip:victim@" + victim.LocalAddr().String(), route},
		{"OPTIONS", "sip:victim@" + victim.LocalAddr().String(), route},
		{"BYE", "sip:victim@" + victim.LocalAddr().String(), route}, // the stateless UDP path
		{"BYE", "sip:victim@" + victim.LocalAddr().String(), forged},
		{"MESSAGE", "sip:victim@" + tl.Addr().String() + ";transport=tcp", route},
		{"INFO", "sip:victim@attacker.invalid", route}, // no DNS lookup either
		{"UPDATE", "sip:victim@" + victim.LocalAddr().String(), forged},
	}
	for i, c := range cases {
		mallory.send(inDialogRaw(mallory, c.method, c.ruri, c.route, "forged-"+strconv.Itoa(i), "hello"))
		if r := mallory.await(false); r.StatusCode != 403 {
			t.Errorf("%s to %s: %d %s, want 403", c.method, c.ruri, r.StatusCode, r.Reason)
		}
	}
	// An ACK gets no answer; the counter shows it was refused too.
	mallory.send(inDialogRaw(mallory, "ACK", "sip:victim@"+victim.LocalAddr().String(), route, "forged-ack", ""))
	want := float64(len(cases) + 1)
	testutil.WaitFor(t, 5*time.Second, "every forged request to be refused", func() bool {
		return counter(t, e.reg, "convene_sip_denied_total", map[string]string{"reason": "dialog"}) == want
	})
	if n := udpGot.Load(); n != 0 {
		t.Errorf("the UDP target got %d datagrams", n)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the node opened %d TCP connections to the target", n)
	}
}

// TestNoRelayPortsWithoutAuthenticatedCall: item 2. A re-offer (UPDATE
// with SDP) outside any dialog the node proxied allocates nothing, and an
// INVITE that was not authenticated (auth_calls off) is proxied without
// the relay; an authenticated call still gets relay ports (SIPp tests in
// call_test.go).
func TestNoRelayPortsWithoutAuthenticatedCall(t *testing.T) {
	rl := newTestRelay(t)
	e := newTestEnv(t, func(o *Options) { o.Media = rl; o.AuthCalls = false }, "alice", "bob")
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
	for range 8 {
		sdp += "m=audio 49170 RTP/AVP 0\r\n"
	}
	mallory := newPhone(t, "mallory", e.srv.Addr())
	for i := range 2 {
		msg := inDialogRaw(mallory, "UPDATE", "sip:victim@127.0.0.1:9", "sip:"+e.srv.Addr()+";lr", "grab-"+strconv.Itoa(i), sdp)
		msg = strings.Replace(msg, "Content-Length:", "Content-Type: application/sdp\r\nContent-Length:", 1)
		mallory.send(msg)
		if r := mallory.await(false); r.StatusCode != 403 {
			t.Errorf("UPDATE with SDP for an unknown call: %d, want 403", r.StatusCode)
		}
	}
	if n := rl.Calls(); n != 0 {
		t.Fatalf("the relay holds %d calls after forged re-offers", n)
	}

	bob := newPhone(t, "bob", e.srv.Addr())
	bob.login("MD5", "")
	offers := make(chan []byte, 1)
	bob.onRequest(func(req *sip.Request) []string {
		if req.Method == sip.INVITE {
			offers <- req.Body()
			return []string{reply(req, 486, "Busy Here", "b1")}
		}
		return nil
	})
	alice := newPhone(t, "alice", e.srv.Addr())
	alice.invite("sip:bob@convene.test", "unauth-call", "z9hG4bKunauth", "")
	if r := alice.await(false); r.StatusCode != 486 {
		t.Fatalf("unauthenticated INVITE: %d, want bob's 486", r.StatusCode)
	}
	if offer := <-offers; !strings.Contains(string(offer), "m=audio 49170 ") {
		t.Errorf("bob got a rewritten offer for an unauthenticated call:\n%s", offer)
	}
	if n := rl.Calls(); n != 0 {
		t.Errorf("the relay holds %d calls after an unauthenticated INVITE", n)
	}
}

// TestEveryMethodIsRateLimited: item 4. A burst of OPTIONS, MESSAGE and BYE
// from one source gets 503 with Retry-After beyond the limit, and no UDP
// answer is more than maxAmplification times its request.
func TestEveryMethodIsRateLimited(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.RequestRate = 5 }) // burst 10
	p := newPhone(t, "mallory", e.srv.Addr())
	for _, method := range []string{"OPTIONS", "MESSAGE", "BYE"} {
		got := map[int]int{}
		for i := range 40 {
			msg := method + " sip:convene.test SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bK" + method +
				strconv.Itoa(i) + "\r\nMax-Forwards: 70\r\nFrom: <sip:m@convene.test>;tag=x\r\nTo: <sip:convene.test>\r\n" +
				"Call-ID: rl-" + method + strconv.Itoa(i) + "\r\nCSeq: 1 " + method + "\r\nContent-Length: 0\r\n\r\n"
			p.send(msg)
			r := p.await(false)
			got[r.StatusCode]++
			if n := len(r.String()); n > maxAmplification*len(msg) {
				t.Errorf("%s: %d-byte answer to a %d-byte request", method, n, len(msg))
			}
			if r.StatusCode == 503 {
				if h := r.GetHeader("Retry-After"); h == nil || h.Value() == "0" {
					t.Errorf("%s: 503 without Retry-After", method)
				}
			}
		}
		if got[503] < 25 {
			t.Errorf("%s: answers %v, want most of 40 refused with 503 (limit 5/s, burst 10)", method, got)
		}
		time.Sleep(2500 * time.Millisecond) // let the bucket refill for the next method
	}
	if n := counter(t, e.reg, "convene_sip_rate_limited_total", map[string]string{"method": "OPTIONS"}); n < 25 {
		t.Errorf("rate_limited{OPTIONS} = %v", n)
	}
}

// TestSmallRequestsGetSmallAnswers: item 4. The largest answer an
// unauthenticated sender can draw is the digest challenge; for a minimal
// REGISTER it stays within maxAmplification times the request.
func TestSmallRequestsGetSmallAnswers(t *testing.T) {
	e := newTestEnv(t, nil)
	c, err := net.Dial("udp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := "REGISTER sip:convene.test SIP/2.0\r\nVia: SIP/2.0/UDP 1.2.3.4;branch=z9hG4bKa\r\nFrom: <sip:a@convene.test>;tag=1\r\n" +
		"To: <sip:a@convene.test>\r\nCall-ID: a\r\nCSeq: 1 REGISTER\r\n\r\n"
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(buf[:n]), "SIP/2.0 401") {
		t.Fatalf("answer: %q", buf[:n])
	}
	if n > maxAmplification*len(msg) {
		t.Errorf("a %d-byte REGISTER drew a %d-byte answer", len(msg), n)
	}
}

// TestTCPConnectionCaps: item 5. Connections beyond the per-IP and total
// caps are closed at once, and idle ones are closed after the idle
// timeout, so they stop holding goroutines.
func TestTCPConnectionCaps(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.TCPMaxConnsPerIP, o.TCPMaxConns, o.TCPIdle = 5, 8, 500*time.Millisecond
	})
	pong := func(c net.Conn) bool {
		c.Write([]byte("\r\n\r\n"))
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 8)
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == "\r\n"
	}
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", e.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	served := 0
	for range 12 {
		if pong(dial("127.0.0.1")) {
			served++
		}
	}
	if served != 5 {
		t.Errorf("%d of 12 connections from one IP were served, want the per-IP cap 5", served)
	}
	for range 6 {
		if pong(dial("127.0.0.2")) {
			served++
		}
	}
	if served != 8 {
		t.Errorf("%d connections served in all, want the total cap 8", served)
	}
	if n := counter(t, e.reg, "convene_sip_denied_total", map[string]string{"reason": "tcp_conns"}); n != 10 {
		t.Errorf("denied{tcp_conns} = %v, want 10", n)
	}
	// Idle connections are closed and their slots freed.
	testutil.WaitFor(t, 10*time.Second, "idle connections to be closed", func() bool {
		return e.srv.tcp.(*capListener).count() == 0
	})
	if !pong(dial("127.0.0.1")) {
		t.Error("a new connection is refused after the idle ones were closed")
	}
}

// TestDigestURIMustBeTheRequestURI: item 6.
func TestDigestURIMustBeTheRequestURI(t *testing.T) {
	e := newTestEnv(t, nil, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	p.register("", "", "")
	c := challenges(p.await(false), "WWW-Authenticate")[0]
	p.register("", "", authorization("Authorization", c.algorithm, "alice", testPassword, c, "REGISTER", "sip:evil.example", 1))
	if r := p.await(false); r.StatusCode != 400 {
		t.Errorf("digest uri sip:evil.example: %d, want 400", r.StatusCode)
	}
	p.register("", "", authorization("Authorization", c.algorithm, "alice", testPassword, c, "REGISTER", "sip:convene.test", 2))
	if r := p.await(false); r.StatusCode != 200 {
		t.Errorf("digest uri = Request-URI: %d, want 200", r.StatusCode)
	}
}

// TestContactsCap: item 10. An account cannot register more contacts than
// the cap; refreshing the ones it has still works.
func TestContactsCap(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.MaxContacts = 2 }, "alice")
	phones := []*phone{newPhone(t, "alice", e.srv.Addr()), newPhone(t, "alice", e.srv.Addr())}
	for _, p := range phones {
		p.login("MD5", "")
	}
	third := newPhone(t, "alice", e.srv.Addr())
	third.register("", "", "")
	c := challenges(third.await(false), "WWW-Authenticate")[0]
	third.register("", "", authorization("Authorization", c.algorithm, "alice", testPassword, c, "REGISTER", "sip:convene.test", 1))
	if r := third.await(false); r.StatusCode != 403 {
		t.Errorf("third contact: %d %s, want 403", r.StatusCode, r.Reason)
	}
	if n := len(e.srv.loc.lookup("alice", time.Now())); n != 2 {
		t.Errorf("alice has %d contacts, want 2", n)
	}
	phones[0].login("MD5", "") // a refresh is not a new contact
}

// TestRegisterIsDurableWhenAnswered: item 12. The 200 of a REGISTER is
// sent only after its binding is in the catalog file: another connection
// to the file sees it the moment the answer arrives, with the write-behind
// timer far away, so a kill -9 right after the answer loses nothing.
func TestRegisterIsDurableWhenAnswered(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.FlushInterval = time.Hour }, "alice", "bob")
	other, err := catalog.Open(context.Background(), "sqlite", e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, user := range []string{"alice", "bob"} {
		p := newPhone(t, user, e.srv.Addr())
		p.login("MD5", "")
		bs, err := other.SIPBindings(context.Background(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range bs {
			found = found || b.Username == user
		}
		if !found {
			t.Fatalf("%s's REGISTER was answered 200 before its binding was stored (stored: %v)", user, bs)
		}
	}
	if n := counter(t, e.reg, "convene_sip_register_commit_seconds", nil); n < 0 {
		t.Fatal("commit histogram missing")
	}
}
