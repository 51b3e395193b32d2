package sip

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// phone is a minimal SIP user agent over UDP for protocol tests: it sends
// hand-written requests and answers requests with a handler. Unlike SIPp
// and baresip it lets a test send exactly the bytes a case needs (a reused
// nonce, a private Via, a 486).
type phone struct {
	t      testing.TB
	conn   *net.UDPConn
	server *net.UDPAddr
	user   string
	cseq   int
	callID string

	mu       sync.Mutex
	handler  func(req *sip.Request) []string // responses to send
	requests []*sip.Request
	resps    chan *sip.Response
}

func newPhone(t testing.TB, user, server string) *phone {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := net.ResolveUDPAddr("udp", server)
	p := &phone{t: t, conn: c, server: sa, user: user, callID: fmt.Sprintf("%s-%d", user, time.Now().UnixNano()),
		resps: make(chan *sip.Response, 64)}
	go p.read()
	t.Cleanup(func() { c.Close() })
	return p
}

func (p *phone) addr() string { return p.conn.LocalAddr().String() }

func (p *phone) read() {
	buf := make([]byte, 65535)
	parser := sip.NewParser()
	for {
		n, from, err := p.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		msg, err := parser.ParseSIP(append([]byte(nil), buf[:n]...))
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *sip.Response:
			p.resps <- m
		case *sip.Request:
			p.mu.Lock()
			p.requests = append(p.requests, m)
			h := p.handler
			p.mu.Unlock()
			if h != nil {
				for _, r := range h(m) {
					p.conn.WriteToUDP([]byte(r), from)
				}
			}
		}
	}
}

func (p *phone) send(msg string) {
	p.t.Helper()
	if _, err := p.conn.WriteToUDP([]byte(msg), p.server); err != nil {
		p.t.Fatal(err)
	}
}

// await returns the next final (or, with provisional, any) response.
func (p *phone) await(provisional bool) *sip.Response {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r := <-p.resps:
			if r.StatusCode >= 200 || provisional {
				return r
			}
		case <-timeout:
			p.t.Fatalf("%s: no response", p.user)
			return nil
		}
	}
}

// register sends a REGISTER with the given extra header lines.
func (p *phone) register(via, contact, extra string) {
	p.cseq++
	if via == "" {
		via = p.addr()
	}
	if contact == "" {
		contact = "<sip:" + p.user + "@" + p.addr() + ">"
	}
	p.send("REGISTER sip:convene.test SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP " + via + ";branch=z9hG4bK" + strconv.FormatInt(time.Now().UnixNano(), 36) + ";rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:" + p.user + "@convene.test>;tag=" + p.user + "tag\r\n" +
		"To: <sip:" + p.user + "@convene.test>\r\nCall-ID: " + p.callID + "\r\n" +
		"CSeq: " + strconv.Itoa(p.cseq) + " REGISTER\r\nContact: " + contact + "\r\n" + extra +
		"Content-Length: 0\r\n\r\n")
}

// challenge is a parsed WWW-Authenticate / Proxy-Authenticate.
type challenge struct {
	algorithm, nonce, realm string
	stale                   bool
}

func challenges(r *sip.Response, header string) []challenge {
	var out []challenge
	for _, h := range r.GetHeaders(header) {
		v := h.Value()
		c := challenge{algorithm: param(v, "algorithm"), nonce: param(v, "nonce"), realm: param(v, "realm"),
			stale: param(v, "stale") == "true"}
		out = append(out, c)
	}
	return out
}

func param(v, name string) string {
	i := strings.Index(v, name+"=")
	if i < 0 {
		return ""
	}
	v = v[i+len(name)+1:]
	if strings.HasPrefix(v, `"`) {
		v = v[1:]
		return v[:strings.IndexByte(v, '"')]
	}
	if j := strings.IndexAny(v, ", "); j >= 0 {
		return v[:j]
	}
	return v
}

// authorization computes a qop=auth digest response (RFC 7616 3.4.1).
func authorization(header, alg, user, password string, c challenge, method, uri string, nc int) string {
	var h func() hash.Hash = md5.New
	if alg == "SHA-256" {
		h = sha256.New
	}
	hx := func(s string) string { x := h(); x.Write([]byte(s)); return hex.EncodeToString(x.Sum(nil)) }
	ha1 := hx(user + ":" + c.realm + ":" + password)
	ha2 := hx(method + ":" + uri)
	ncs := fmt.Sprintf("%08x", nc)
	resp := hx(ha1 + ":" + c.nonce + ":" + ncs + ":cn0nce:auth:" + ha2)
	return fmt.Sprintf(`%s: Digest username="%s", realm="%s", nonce="%s", uri="%s", response="%s", algorithm=%s, cnonce="cn0nce", qop=auth, nc=%s`+"\r\n",
		header, user, c.realm, c.nonce, uri, resp, alg, ncs)
}

// login registers p with a digest of alg and returns the challenge used.
func (p *phone) login(alg string, extraContact string) challenge {
	p.t.Helper()
	p.register("", extraContact, "")
	r := p.await(false)
	if r.StatusCode != 401 {
		p.t.Fatalf("first REGISTER: %d, want 401", r.StatusCode)
	}
	var c challenge
	for _, ch := range challenges(r, "WWW-Authenticate") {
		if ch.algorithm == alg {
			c = ch
		}
	}
	if c.nonce == "" {
		p.t.Fatalf("no %s challenge in %v", alg, r.GetHeaders("WWW-Authenticate"))
	}
	p.register("", extraContact, authorization("Authorization", alg, p.user, testPassword, c, "REGISTER", "sip:convene.test", 1))
	if r := p.await(false); r.StatusCode != 200 {
		p.t.Fatalf("authenticated REGISTER: %d %s", r.StatusCode, r.Reason)
	}
	return c
}
