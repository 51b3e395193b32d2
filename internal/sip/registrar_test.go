package sip

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRegisterSHA256AndNonceReuse(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.Algorithms = []string{"SHA-256", "MD5"} }, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	p.register("", "", "")
	r := p.await(false)
	chs := challenges(r, "WWW-Authenticate")
	if r.StatusCode != 401 || len(chs) != 2 || chs[0].algorithm != "SHA-256" || chs[1].algorithm != "MD5" ||
		chs[0].nonce != chs[1].nonce || !strings.Contains(r.GetHeader("WWW-Authenticate").Value(), `qop="auth"`) {
		t.Fatalf("challenge: %d %v", r.StatusCode, r.GetHeaders("WWW-Authenticate"))
	}
	c := chs[0]
	for nc := 1; nc <= 3; nc++ {
		p.register("", "", authorization("Authorization", "SHA-256", "alice", testPassword, c, "REGISTER", "sip:convene.test", nc))
		if r := p.await(false); r.StatusCode != 200 {
			t.Fatalf("nc=%d: %d, want 200 without a new challenge", nc, r.StatusCode)
		}
	}
	// A replayed nonce-count is refused as stale: the client gets a new nonce.
	p.register("", "", authorization("Authorization", "SHA-256", "alice", testPassword, c, "REGISTER", "sip:convene.test", 2))
	r = p.await(false)
	if chs := challenges(r, "WWW-Authenticate"); r.StatusCode != 401 || !chs[0].stale {
		t.Fatalf("replayed nc: %d %v, want 401 stale=true", r.StatusCode, r.GetHeaders("WWW-Authenticate"))
	}
	// The MD5 digest of the same password works too.
	p.register("", "", authorization("Authorization", "MD5", "alice", testPassword, challenges(r, "WWW-Authenticate")[0], "REGISTER", "sip:convene.test", 1))
	if r := p.await(false); r.StatusCode != 200 {
		t.Fatalf("MD5: %d", r.StatusCode)
	}
	// A wrong password is challenged again and counted.
	p.register("", "", authorization("Authorization", "MD5", "alice", "wrong", c, "REGISTER", "sip:convene.test", 9))
	if r := p.await(false); r.StatusCode != 401 {
		t.Fatalf("wrong password: %d", r.StatusCode)
	}
	if got := counter(t, e.reg, "convene_sip_auth_failures_total", map[string]string{"reason": "bad_response"}); got != 1 {
		t.Errorf("bad_response failures = %v, want 1", got)
	}
	if got := counter(t, e.reg, "convene_sip_auth_failures_total", map[string]string{"reason": "stale"}); got != 1 {
		t.Errorf("stale failures = %v, want 1", got)
	}
}

func TestStaleNonceAfterTTL(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newTestEnv(t, func(o *Options) { o.Now = clock; o.NonceTTL = time.Minute }, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	c := p.login("MD5", "")
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	p.register("", "", authorization("Authorization", "MD5", "alice", testPassword, c, "REGISTER", "sip:convene.test", 2))
	r := p.await(false)
	if chs := challenges(r, "WWW-Authenticate"); r.StatusCode != 401 || len(chs) == 0 || !chs[0].stale || chs[0].nonce == c.nonce {
		t.Fatalf("expired nonce: %d %v, want 401 with stale=true and a new nonce", r.StatusCode, r.GetHeaders("WWW-Authenticate"))
	}
}

func TestRegistrationsSurviveRestart(t *testing.T) {
	e := newTestEnv(t, nil, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	p.login("MD5", "")
	dsn := e.dsn
	e.close() // flushes the bindings to the catalog
	e2 := startTestEnv(t, dsn, false, nil)
	bs := e2.srv.loc.lookup("alice", time.Now())
	if len(bs) != 1 || bs[0].contact != "sip:alice@"+p.addr() {
		t.Fatalf("after restart: %+v", bs)
	}
	if got := counter(t, e2.reg, "convene_sip_registrations", nil); got != 1 {
		t.Errorf("registrations gauge = %v, want 1", got)
	}
}

func TestNATGetsShortExpires(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.NATExpires = 90 * time.Second }, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	// The phone believes it is 192.168.1.20:5060; packets come from 127.0.0.1:port.
	via, contact := "192.168.1.20:5060", "<sip:alice@192.168.1.20:5060>"
	p.register(via, contact, "Expires: 3600\r\n")
	r := p.await(false)
	c := challenges(r, "WWW-Authenticate")[0]
	p.register(via, contact, "Expires: 3600\r\n"+authorization("Authorization", "MD5", "alice", testPassword, c, "REGISTER", "sip:convene.test", 1))
	r = p.await(false)
	if r.StatusCode != 200 {
		t.Fatalf("REGISTER: %d", r.StatusCode)
	}
	if got := r.Contact().Params.GetOr("expires", ""); got != "90" {
		t.Errorf("granted expires %q, want 90 (nat_expires)", got)
	}
	if v := r.Via(); v.Params.GetOr("received", "") != "127.0.0.1" || v.Params.GetOr("rport", "") == "" {
		t.Errorf("response Via %q lacks received/rport", v.Value())
	}
	bs := e.srv.loc.lookup("alice", time.Now())
	if len(bs) != 1 || !bs[0].nat {
		t.Fatalf("binding %+v, want one NATed", bs)
	}
	if tp, addr := bs[0].dest(); tp != "udp" || addr != p.addr() {
		t.Errorf("NATed contact reached at %s %s, want udp %s (where its REGISTER came from)", tp, addr, p.addr())
	}
}

func TestRegisterRateLimit(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.RegisterRate = 1; o.RetryAfter = 7 * time.Second }, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	codes := map[int]int{}
	var retry string
	for range 6 {
		p.register("", "", "")
		r := p.await(false)
		codes[r.StatusCode]++
		if r.StatusCode == 503 {
			retry = r.GetHeader("Retry-After").Value()
		}
	}
	if codes[503] < 3 || codes[401] < 1 || retry != "7" {
		t.Fatalf("responses %v, Retry-After %q: want 401s within the burst of 2, then 503 with Retry-After 7", codes, retry)
	}
	if got := counter(t, e.reg, "convene_sip_rate_limited_total", map[string]string{"method": "REGISTER"}); got != float64(codes[503]) {
		t.Errorf("rate limited counter %v, want %d", got, codes[503])
	}
}

func TestRegisterUnregisterAndMinExpires(t *testing.T) {
	e := newTestEnv(t, nil, "alice")
	p := newPhone(t, "alice", e.srv.Addr())
	c := p.login("MD5", "")
	nc := 2
	reg := func(contact, extra string) int {
		p.register("", contact, extra+authorization("Authorization", "MD5", "alice", testPassword, c, "REGISTER", "sip:convene.test", nc))
		nc++
		return p.await(false).StatusCode
	}
	if code := reg("", "Expires: 10\r\n"); code != 423 {
		t.Errorf("Expires 10: %d, want 423 Interval Too Brief", code)
	}
	if code := reg("*", "Expires: 0\r\n"); code != 200 {
		t.Errorf("Contact * Expires 0: %d, want 200", code)
	}
	if bs := e.srv.loc.lookup("alice", time.Now()); len(bs) != 0 {
		t.Errorf("bindings after unregister: %+v", bs)
	}
	// Someone else's AOR is forbidden.
	p.user = "alice"
	p.send("REGISTER sip:convene.test SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bKx1\r\nMax-Forwards: 70\r\n" +
		"From: <sip:bob@convene.test>;tag=x\r\nTo: <sip:bob@convene.test>\r\nCall-ID: " + p.callID + "\r\nCSeq: 99 REGISTER\r\n" +
		"Contact: <sip:bob@" + p.addr() + ">\r\n" +
		authorization("Authorization", "MD5", "alice", testPassword, c, "REGISTER", "sip:convene.test", nc) + "Content-Length: 0\r\n\r\n")
	if r := p.await(false); r.StatusCode != 403 {
		t.Errorf("alice registering bob: %d, want 403", r.StatusCode)
	}
	_ = context.Background
}
