package sip

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/testutil"
)

// reply builds a response to req with a fixed To tag (the phone's dialog);
// the tag is also the Contact's user part, at the request's destination.
func reply(req *sip.Request, code int, reason, tag string) string {
	if to := req.To(); to != nil && !to.Params.Has("tag") && code > 100 {
		to.Params.Add("tag", tag)
	}
	res := sip.NewResponseFromRequest(req, code, reason, nil)
	if code >= 180 && code < 300 {
		res.AppendHeader(sip.NewHeader("Contact", "<sip:"+tag+"@"+req.Recipient.Host+":"+strconv.Itoa(req.Recipient.Port)+">"))
	}
	return res.String()
}

// invite sends an INVITE from p to uri (with a plain SDP offer).
func (p *phone) invite(uri, callID, branch, extra string) {
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0\r\n"
	p.send("INVITE " + uri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=" + branch + ";rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:" + p.user + "@convene.test>;tag=caller1\r\nTo: <" + uri + ">\r\n" +
		"Call-ID: " + callID + "\r\nCSeq: 1 INVITE\r\nContact: <sip:" + p.user + "@" + p.addr() + ">\r\n" + extra +
		"Content-Type: application/sdp\r\nContent-Length: " + strconv.Itoa(len(sdp)) + "\r\n\r\n" + sdp)
}

// inDialog sends ACK or BYE along the route set of a 2xx.
func (p *phone) inDialog(method string, ok *sip.Response, cseq int) {
	route := ok.RecordRoute().Address.String()
	target := ok.Contact().Address.String()
	toTag, _ := ok.To().Params.Get("tag")
	p.send(method + " " + target + " SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bK" + method +
		strconv.FormatInt(time.Now().UnixNano(), 36) + ";rport\r\nMax-Forwards: 70\r\nRoute: <" + route + ">\r\n" +
		"From: <sip:" + p.user + "@convene.test>;tag=caller1\r\nTo: " + ok.To().Value() + "\r\n" +
		"Call-ID: " + string(*ok.CallID()) + "\r\nCSeq: " + strconv.Itoa(cseq) + " " + method + "\r\nContent-Length: 0\r\n\r\n")
	_ = toTag
}

func (p *phone) saw(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if string(r.Method) == method {
			n++
		}
	}
	return n
}

func (p *phone) requestsOf(methods ...string) []*sip.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*sip.Request
	for _, r := range p.requests {
		for _, m := range methods {
			if string(r.Method) == m {
				out = append(out, r)
			}
		}
	}
	return out
}

func (p *phone) onRequest(h func(req *sip.Request) []string) {
	p.mu.Lock()
	p.handler = h
	p.mu.Unlock()
}

func noAuthCalls(o *Options) { o.AuthCalls = false }

func TestProxyNotFoundAndUnavailable(t *testing.T) {
	e := newTestEnv(t, noAuthCalls, "alice", "bob")
	a := newPhone(t, "alice", e.srv.Addr())
	a.invite("sip:nobody@convene.test", "c404", "z9hG4bK404", "")
	if r := a.await(false); r.StatusCode != 404 {
		t.Errorf("unknown user: %d, want 404", r.StatusCode)
	}
	a.invite("sip:bob@convene.test", "c480", "z9hG4bK480", "")
	if r := a.await(false); r.StatusCode != 480 {
		t.Errorf("bob not registered: %d, want 480", r.StatusCode)
	}
	a.invite("sip:bob@elsewhere.example", "c403", "z9hG4bK403", "")
	if r := a.await(false); r.StatusCode != 403 {
		t.Errorf("foreign domain: %d, want 403 (no open relay)", r.StatusCode)
	}
}

func TestProxyAuthCalls(t *testing.T) {
	e := newTestEnv(t, nil, "alice", "bob")
	a := newPhone(t, "alice", e.srv.Addr())
	a.invite("sip:bob@convene.test", "c407", "z9hG4bK407a", "")
	r := a.await(false)
	chs := challenges(r, "Proxy-Authenticate")
	if r.StatusCode != 407 || len(chs) == 0 {
		t.Fatalf("INVITE without credentials: %d, want 407 with Proxy-Authenticate", r.StatusCode)
	}
	a.invite("sip:bob@convene.test", "c407", "z9hG4bK407b",
		authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "INVITE", "sip:bob@convene.test", 1))
	if r := a.await(false); r.StatusCode != 480 {
		t.Errorf("authenticated INVITE to unregistered bob: %d, want 480", r.StatusCode)
	}
}

func TestProxyBusyPassedThrough(t *testing.T) {
	e := newTestEnv(t, noAuthCalls, "alice", "bob")
	b := newPhone(t, "bob", e.srv.Addr())
	b.login("MD5", "")
	b.onRequest(func(req *sip.Request) []string {
		if req.IsInvite() {
			return []string{reply(req, 486, "Busy Here", "bobtag")}
		}
		return nil
	})
	a := newPhone(t, "alice", e.srv.Addr())
	a.invite("sip:bob@convene.test", "c486", "z9hG4bK486", "")
	if r := a.await(false); r.StatusCode != 486 {
		t.Fatalf("busy callee: %d, want 486", r.StatusCode)
	}
	// The proxy ACKs the 486 itself (hop by hop).
	testutil.WaitFor(t, 5*time.Second, "the proxy's ACK of the 486", func() bool { return b.saw("ACK") == 1 })
	testutil.WaitFor(t, 5*time.Second, "the failed call to be counted", func() bool {
		return counter(t, e.reg, "convene_sip_calls_total", map[string]string{"result": "failed"}) == 1
	})
}

// TestProxyForkAnswerCancelBye: bob has two phones; both ring, one
// answers, the other gets a CANCEL; ACK and BYE follow the Record-Route.
func TestProxyForkAnswerCancelBye(t *testing.T) {
	e := newTestEnv(t, noAuthCalls, "alice", "bob")
	b1 := newPhone(t, "bob", e.srv.Addr())
	b1.login("MD5", "")
	b2 := newPhone(t, "bob", e.srv.Addr())
	b2.login("MD5", "")
	if n := len(e.srv.loc.lookup("bob", time.Now())); n != 2 {
		t.Fatalf("bob has %d contacts, want 2", n)
	}
	answer := make(chan struct{})
	b1.onRequest(func(req *sip.Request) []string {
		switch req.Method {
		case sip.INVITE:
			<-answer
			return []string{reply(req, 180, "Ringing", "b1"), reply(req, 200, "OK", "b1")}
		case sip.BYE:
			return []string{reply(req, 200, "OK", "b1")}
		}
		return nil
	})
	var inv2 *sip.Request
	b2.onRequest(func(req *sip.Request) []string {
		switch req.Method {
		case sip.INVITE:
			inv2 = req
			close(answer) // b1 answers once b2 rings
			return []string{reply(req, 180, "Ringing", "b2")}
		case sip.CANCEL:
			return []string{reply(req, 200, "OK", "b2"), reply(inv2, 487, "Request Terminated", "b2")}
		}
		return nil
	})
	a := newPhone(t, "alice", e.srv.Addr())
	a.invite("sip:bob@convene.test", "cfork", "z9hG4bKfork", "")
	ok := a.await(false)
	if ok.StatusCode != 200 {
		t.Fatalf("forked INVITE: %d, want 200", ok.StatusCode)
	}
	rr := ok.RecordRoute()
	if rr == nil || rr.Address.Port != mustPort(e.srv.Addr()) || !rr.Address.UriParams.Has("lr") {
		t.Fatalf("200 lacks the proxy's Record-Route: %v", ok.RecordRoute())
	}
	testutil.WaitFor(t, 5*time.Second, "the other phone to get a CANCEL", func() bool { return b2.saw("CANCEL") == 1 })
	a.inDialog("ACK", ok, 1)
	testutil.WaitFor(t, 5*time.Second, "the ACK to reach the answering phone", func() bool { return b1.saw("ACK") == 1 })
	// A re-INVITE follows the route set to the answering phone.
	a.inDialog("INVITE", ok, 2)
	if r := a.await(false); r.StatusCode != 200 {
		t.Fatalf("re-INVITE: %d", r.StatusCode)
	}
	if b1.saw("INVITE") != 2 || b2.saw("INVITE") != 1 {
		t.Errorf("INVITEs: b1 %d, b2 %d; want the re-INVITE at b1 only", b1.saw("INVITE"), b2.saw("INVITE"))
	}
	a.inDialog("ACK", ok, 2)
	testutil.WaitFor(t, 5*time.Second, "the re-INVITE's ACK", func() bool { return b1.saw("ACK") == 2 })
	a.inDialog("BYE", ok, 3)
	if r := a.await(false); r.StatusCode != 200 {
		t.Fatalf("BYE: %d", r.StatusCode)
	}
	if b1.saw("BYE") != 1 || b2.saw("BYE") != 0 {
		t.Errorf("BYE reached b1 %d times and b2 %d times", b1.saw("BYE"), b2.saw("BYE"))
	}
	// In-dialog ACK and BYE over UDP were forwarded statelessly (stateless.go).
	for _, r := range b1.requestsOf("BYE", "ACK") {
		if br, _ := r.Via().Params.Get("branch"); !strings.HasPrefix(br, "z9hG4bK-sl") {
			t.Errorf("%s forwarded with branch %q, want the stateless one", r.Method, br)
		}
	}
	if got := counter(t, e.reg, "convene_sip_calls_active", nil); got != 0 {
		t.Errorf("active calls after BYE = %v", got)
	}
}

func TestCallerCancel(t *testing.T) {
	e := newTestEnv(t, noAuthCalls, "alice", "bob")
	b := newPhone(t, "bob", e.srv.Addr())
	b.login("MD5", "")
	var inv *sip.Request
	b.onRequest(func(req *sip.Request) []string {
		switch req.Method {
		case sip.INVITE:
			inv = req
			return []string{reply(req, 180, "Ringing", "b")}
		case sip.CANCEL:
			return []string{reply(req, 200, "OK", "b"), reply(inv, 487, "Request Terminated", "b")}
		}
		return nil
	})
	a := newPhone(t, "alice", e.srv.Addr())
	a.invite("sip:bob@convene.test", "ccancel", "z9hG4bKcancel", "")
	if r := a.await(true); r.StatusCode != 100 && r.StatusCode != 180 {
		t.Fatalf("first response %d", r.StatusCode)
	}
	testutil.WaitFor(t, 5*time.Second, "bob to ring", func() bool { return b.saw("INVITE") == 1 })
	time.Sleep(50 * time.Millisecond)
	a.send("CANCEL sip:bob@convene.test SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKcancel;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: <sip:bob@convene.test>\r\n" +
		"Call-ID: ccancel\r\nCSeq: 1 CANCEL\r\nContent-Length: 0\r\n\r\n")
	got := map[int]bool{}
	for len(got) < 2 {
		r := a.await(false)
		got[r.StatusCode] = true
	}
	if !got[200] || !got[487] {
		t.Errorf("caller got %v, want 200 (CANCEL) and 487 (INVITE)", got)
	}
	testutil.WaitFor(t, 5*time.Second, "the CANCEL to reach bob", func() bool { return b.saw("CANCEL") == 1 })
}

func TestTCPKeepAlivePong(t *testing.T) {
	e := newTestEnv(t, nil)
	c, err := net.Dial("tcp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("\r\n\r\n")) // RFC 5626 3.5.1 ping
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "\r\n" {
		t.Fatalf("pong: %q %v, want CRLF", buf[:n], err)
	}
	if res := optionsPing(t, "tcp", e.srv.Addr()); !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Errorf("OPTIONS after keep-alive: %q", res)
	}
}

// TestDropSilentContact: a contact that does not answer the OPTIONS probe
// is dropped. The probe's wait is shortened for the test.
func TestDropSilentContact(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.ProbeInterval = 300 * time.Millisecond
		o.ProbeTimeout = 400 * time.Millisecond
	}, "alice", "bob")
	alive := newPhone(t, "alice", e.srv.Addr())
	alive.onRequest(func(req *sip.Request) []string { return []string{reply(req, 200, "OK", "a")} })
	alive.login("MD5", "")
	silent := newPhone(t, "bob", e.srv.Addr())
	silent.login("MD5", "")
	silent.onRequest(func(*sip.Request) []string { return nil }) // never answers
	testutil.WaitFor(t, 10*time.Second, "the silent contact to be dropped", func() bool {
		return len(e.srv.loc.lookup("bob", time.Now())) == 0
	})
	if len(e.srv.loc.lookup("alice", time.Now())) != 1 {
		t.Error("the answering contact was dropped too")
	}
	if alive.saw("OPTIONS") == 0 {
		t.Error("the answering contact was never probed")
	}
	if got := counter(t, e.reg, "convene_sip_contacts_dropped_total", nil); got != 1 {
		t.Errorf("dropped counter = %v, want 1", got)
	}
}

func mustPort(addr string) int {
	_, p := splitHostPort(addr)
	return p
}
