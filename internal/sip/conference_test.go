package sip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// confRecorder is the session side of dial-in for these tests (the node's
// real one, with sessions and mixers, is tested in package node with
// baresip): it records who joined and who left.
type confRecorder struct {
	mu     sync.Mutex
	joined []string // "user codec remote from signalling-ip"
	left   int
	digits []byte
	roster []Participant
	refuse error // Join's answer when set
}

func (c *confRecorder) IsConference(_ context.Context, user string) bool { return user == "s_live" }

func (c *confRecorder) Join(_ context.Context, caller Caller) (netip.AddrPort, ConferenceCall, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != nil {
		return netip.AddrPort{}, ConferenceCall{}, c.refuse
	}
	c.joined = append(c.joined, caller.User+" "+caller.Codec+" "+caller.Media.String()+" from "+caller.Signal.String())
	return netip.MustParseAddrPort("127.0.0.1:40000"), ConferenceCall{
		Leave: func() {
			c.mu.Lock()
			c.left++
			c.mu.Unlock()
		},
		Digit: func(d byte) {
			c.mu.Lock()
			c.digits = append(c.digits, d)
			c.mu.Unlock()
		},
	}, nil
}

func (c *confRecorder) Participants(context.Context, string) ([]Participant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Participant(nil), c.roster...), nil
}

func (c *confRecorder) setRoster(ps ...Participant) {
	c.mu.Lock()
	c.roster = ps
	c.mu.Unlock()
}

func (c *confRecorder) state() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.joined...), c.left
}

// TestDialIntoSession: an INVITE to a session is challenged even with
// auth_calls off and joins nothing before it authenticates; a bad offer
// gets 488 and joins nothing; a good one is answered with the node's media
// address and the phone's codec; BYE leaves.
func TestDialIntoSession(t *testing.T) {
	conf := &confRecorder{}
	e := newTestEnv(t, func(o *Options) { o.Conferences = conf; o.AuthCalls = false }, "alice")
	a := newPhone(t, "alice", e.srv.Addr())
	uri := "sip:s_live@convene.test"
	a.invite(uri, "conf1", "z9hG4bKc1", "")
	r := a.await(false)
	chs := challenges(r, "Proxy-Authenticate")
	if r.StatusCode != 407 || len(chs) == 0 {
		t.Fatalf("INVITE to a session without credentials: %d, want 407", r.StatusCode)
	}
	if j, _ := conf.state(); len(j) != 0 {
		t.Fatalf("joined before authenticating: %v", j)
	}
	// A bad offer: 488, nothing joined.
	auth := authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "INVITE", uri, 1)
	bad := "v=0\r\nm=video 9 RTP/AVP 96\r\n"
	a.send("INVITE " + uri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKc2;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: <" + uri + ">\r\n" +
		"Call-ID: conf2\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@" + a.addr() + ">\r\n" + auth +
		"Content-Type: application/sdp\r\nContent-Length: " + strconv.Itoa(len(bad)) + "\r\n\r\n" + bad)
	if r := a.await(false); r.StatusCode != 488 {
		t.Fatalf("INVITE with a video-only offer: %d, want 488", r.StatusCode)
	}
	if j, _ := conf.state(); len(j) != 0 {
		t.Fatalf("joined on a bad offer: %v", j)
	}
	a.invite(uri, "conf3", "z9hG4bKc3", authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "INVITE", uri, 2))
	ok := a.await(false)
	if ok.StatusCode != 200 {
		t.Fatalf("authenticated INVITE to a session: %d, want 200", ok.StatusCode)
	}
	body := string(ok.Body())
	if !strings.Contains(body, "c=IN IP4 127.0.0.1") || !strings.Contains(body, "m=audio 40000 RTP/AVP 0") {
		t.Fatalf("answer does not offer the node's media in PCMU:\n%s", body)
	}
	if j, _ := conf.state(); len(j) != 1 || j[0] != "alice PCMU:0 127.0.0.1:49170 from 127.0.0.1" { // media and signalling source
		t.Fatalf("joined %v", j)
	}
	toTag, _ := ok.To().Params.Get("tag")
	if toTag == "" || ok.Contact() == nil {
		t.Fatalf("2xx without a To tag or Contact:\n%s", ok)
	}
	for i, body := range []string{"Signal=*\r\nDuration=160\r\n", "Signal=1\r\nDuration=160\r\n"} {
		a.send("INFO " + ok.Contact().Address.String() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKi" + strconv.Itoa(i) + ";rport\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: " + ok.To().Value() + "\r\n" +
			"Call-ID: conf3\r\nCSeq: " + strconv.Itoa(10+i) + " INFO\r\nContent-Type: application/dtmf-relay\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		if r := a.await(false); r.StatusCode != 200 {
			t.Fatalf("INFO: %d", r.StatusCode)
		}
	}
	conf.mu.Lock()
	if string(conf.digits) != "*1" {
		t.Errorf("INFO digits %q, want \"*1\"", conf.digits)
	}
	conf.mu.Unlock()
	a.send("BYE " + ok.Contact().Address.String() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKc4;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: " + ok.To().Value() + "\r\n" +
		"Call-ID: conf3\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n")
	if r := a.await(false); r.StatusCode != 200 {
		t.Fatalf("BYE: %d", r.StatusCode)
	}
	if _, left := conf.state(); left != 1 {
		t.Fatalf("left %d times after BYE, want 1", left)
	}
}

// TestDialInMovedOrFull: a conference that sends the caller elsewhere
// (Moved) answers 302 with a Contact for the session at each node, the
// first preferred; one that is full answers 503 with Retry-After.
func TestDialInMovedOrFull(t *testing.T) {
	conf := &confRecorder{refuse: &Moved{To: []string{"127.0.0.2:5070", "[::1]:5060"}, Err: errors.New("node over capacity")}}
	e := newTestEnv(t, func(o *Options) { o.Conferences = conf; o.AuthCalls = false }, "alice")
	a := newPhone(t, "alice", e.srv.Addr())
	uri := "sip:s_live@convene.test"
	a.invite(uri, "mv1", "z9hG4bKm1", "")
	chs := challenges(a.await(false), "Proxy-Authenticate")
	if len(chs) == 0 {
		t.Fatal("no challenge")
	}
	a.invite(uri, "mv2", "z9hG4bKm2", authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "INVITE", uri, 1))
	r := a.await(false)
	if r.StatusCode != 302 {
		t.Fatalf("INVITE to a session the node sends elsewhere: %d, want 302", r.StatusCode)
	}
	var contacts []string
	for _, h := range r.GetHeaders("Contact") {
		contacts = append(contacts, h.Value())
	}
	want := []string{"<sip:s_live@127.0.0.2:5070>;q=1.0", "<sip:s_live@[::1]:5060>;q=0.9"}
	if !slices.Equal(contacts, want) {
		t.Errorf("302 Contacts %q, want %q", contacts, want)
	}
	if w := r.GetHeader("Warning"); w == nil || !strings.Contains(w.Value(), "over capacity") {
		t.Errorf("302 Warning %v, want the reason", w)
	}

	conf.mu.Lock()
	conf.refuse = fmt.Errorf("%w: over capacity", ErrConferenceFull)
	conf.mu.Unlock()
	a.invite(uri, "mv3", "z9hG4bKm3", authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "INVITE", uri, 2))
	if r := a.await(false); r.StatusCode != 503 || r.Contact() != nil || r.GetHeader("Retry-After") == nil {
		t.Fatalf("INVITE to a full session: %d (Contact %v, Retry-After %v), want 503, Retry-After and no Contact",
			r.StatusCode, r.Contact(), r.GetHeader("Retry-After"))
	}
	if j, _ := conf.state(); len(j) != 0 {
		t.Errorf("joined %v", j)
	}
}

func TestParseOffer(t *testing.T) {
	o, err := parseOffer([]byte("v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n" +
		"m=audio 4000 RTP/AVP 96 8 101\r\na=rtpmap:96 opus/48000/2\r\na=rtpmap:101 telephone-event/8000\r\n"))
	if err != nil || o.codec != "opus/48000/2:96" || o.tePT != 101 || o.remote.String() != "192.0.2.1:4000" {
		t.Fatalf("offer %+v, %v", o, err)
	}
	for _, bad := range []string{"", "v=0\r\n", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n",
		"v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=audio 4000 RTP/AVP 18\r\n"} {
		if _, err := parseOffer([]byte(bad)); err == nil {
			t.Errorf("offer %q accepted", bad)
		}
	}
}

// FuzzParseOffer: no SDP crashes the offer parser; what it accepts has an
// address, a port and a codec.
func FuzzParseOffer(f *testing.F) {
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0 101\r\na=rtpmap:101 telephone-event/8000\r\n"))
	f.Add([]byte("v=0\r\nm=audio 1 RTP/AVP 96\r\nc=IN IP6 ::1\r\na=rtpmap:96 opus/48000/2\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseOffer(b)
		if err == nil && (!o.remote.IsValid() || o.remote.Port() == 0 || o.codec == "") {
			t.Fatalf("accepted %+v", o)
		}
		if err == nil {
			_ = answerSDP(o, netip.MustParseAddrPort("127.0.0.1:4000"), 1)
		}
	})
}

func TestInfoDigit(t *testing.T) {
	for _, c := range []struct {
		ct, body string
		want     byte
		ok       bool
	}{
		{"application/dtmf-relay", "Signal=5\r\nDuration=100\r\n", '5', true},
		{"application/dtmf-relay", "signal= #\n", '#', true},
		{"application/dtmf", "*", '*', true},
		{"application/dtmf-relay", "Signal=55", 0, false},
		{"text/plain", "5", 0, false},
		{"application/dtmf", "", 0, false},
	} {
		d, ok := infoDigit(c.ct, []byte(c.body))
		if d != c.want || ok != c.ok {
			t.Errorf("infoDigit(%q, %q) = %q, %v", c.ct, c.body, d, ok)
		}
	}
}

// TestConferenceEvents: a phone subscribes to a session's conference
// events (RFC 4575) with its account; it gets the roster at once, again
// when it changes, and a final NOTIFY when it unsubscribes.
func TestConferenceEvents(t *testing.T) {
	conf := &confRecorder{}
	conf.setRoster(Participant{ID: "m_1", Name: "Ada & co", Phone: false})
	e := newTestEnv(t, func(o *Options) { o.Conferences = conf }, "alice")
	a := newPhone(t, "alice", e.srv.Addr())
	a.onRequest(func(req *sip.Request) []string { return []string{reply(req, 200, "OK", "x")} })
	uri := "sip:s_live@convene.test"
	subscribe := func(branch string, cseq int, extra string) {
		a.send("SUBSCRIBE " + uri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=" + branch + ";rport\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=sub1\r\nTo: <" + uri + ">" + "\r\n" +
			"Call-ID: sub-1\r\nCSeq: " + strconv.Itoa(cseq) + " SUBSCRIBE\r\nContact: <sip:alice@" + a.addr() + ">\r\n" +
			"Event: conference\r\nExpires: 600\r\n" + extra + "Content-Length: 0\r\n\r\n")
	}
	subscribe("z9hG4bKs1", 1, "")
	r := a.await(false)
	chs := challenges(r, "Proxy-Authenticate")
	if r.StatusCode != 407 || len(chs) == 0 {
		t.Fatalf("SUBSCRIBE without credentials: %d, want 407", r.StatusCode)
	}
	subscribe("z9hG4bKs2", 2, authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "SUBSCRIBE", uri, 1))
	ok := a.await(false)
	if ok.StatusCode != 200 {
		t.Fatalf("SUBSCRIBE: %d", ok.StatusCode)
	}
	notifies := func(n int) []*sip.Request {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if ns := a.requestsOf("NOTIFY"); len(ns) >= n {
				return ns
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%d NOTIFYs, want %d", len(a.requestsOf("NOTIFY")), n)
		return nil
	}
	first := notifies(1)[0]
	body := string(first.Body())
	if !strings.Contains(body, `xmlns="urn:ietf:params:xml:ns:conference-info"`) || !strings.Contains(body, "Ada &amp; co") ||
		!strings.Contains(body, `version="1"`) || first.GetHeader("Event").Value() != "conference" {
		t.Fatalf("first NOTIFY:\n%s", first)
	}
	conf.setRoster(Participant{ID: "m_1", Name: "Ada & co"}, Participant{ID: "m_2", Name: "alice (phone)", Phone: true})
	second := notifies(2)[1]
	if b := string(second.Body()); !strings.Contains(b, "alice (phone)") || !strings.Contains(b, `version="2"`) ||
		!strings.Contains(b, "<user-count>2</user-count>") {
		t.Fatalf("NOTIFY after the roster changed:\n%s", b)
	}
	toTag, _ := ok.To().Params.Get("tag")
	a.send("SUBSCRIBE " + uri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKs3;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=sub1\r\nTo: <" + uri + ">;tag=" + toTag + "\r\n" +
		"Call-ID: sub-1\r\nCSeq: 3 SUBSCRIBE\r\nContact: <sip:alice@" + a.addr() + ">\r\n" +
		"Event: conference\r\nExpires: 0\r\nContent-Length: 0\r\n\r\n")
	if r := a.await(false); r.StatusCode != 200 {
		t.Fatalf("unsubscribe: %d", r.StatusCode)
	}
	last := notifies(3)[2]
	if st := last.GetHeader("Subscription-State"); st == nil || !strings.HasPrefix(st.Value(), "terminated") {
		t.Fatalf("final NOTIFY's state: %v", st)
	}
}

// TestConferenceSubscriptionsAreCapped: beyond the node's cap a SUBSCRIBE
// is refused (503), authenticated or not.
func TestConferenceSubscriptionsAreCapped(t *testing.T) {
	conf := &confRecorder{}
	e := newTestEnv(t, func(o *Options) { o.Conferences = conf }, "alice")
	e.srv.csubs.mu.Lock()
	e.srv.csubs.max = 1
	e.srv.csubs.mu.Unlock()
	a := newPhone(t, "alice", e.srv.Addr())
	a.onRequest(func(req *sip.Request) []string { return []string{reply(req, 200, "OK", "x")} })
	uri := "sip:s_live@convene.test"
	var chs []challenge
	for i := range 3 {
		auth := ""
		if chs != nil {
			auth = authorization("Proxy-Authorization", chs[0].algorithm, "alice", testPassword, chs[0], "SUBSCRIBE", uri, i)
		}
		a.send("SUBSCRIBE " + uri + " SIP/2.0\r\nVia: SIP/2.0/UDP " + a.addr() + ";branch=z9hG4bKcap" + strconv.Itoa(i) + ";rport\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=cap" + strconv.Itoa(i) + "\r\nTo: <" + uri + ">\r\n" +
			"Call-ID: cap-" + strconv.Itoa(i) + "\r\nCSeq: 1 SUBSCRIBE\r\nContact: <sip:alice@" + a.addr() + ">\r\n" +
			"Event: conference\r\n" + auth + "Content-Length: 0\r\n\r\n")
		r := a.await(false)
		switch i {
		case 0:
			if chs = challenges(r, "Proxy-Authenticate"); r.StatusCode != 407 || len(chs) == 0 {
				t.Fatalf("first SUBSCRIBE: %d", r.StatusCode)
			}
		case 1:
			if r.StatusCode != 200 {
				t.Fatalf("a subscription under the cap: %d", r.StatusCode)
			}
		case 2:
			if r.StatusCode != 503 {
				t.Fatalf("a subscription over the cap: %d, want 503", r.StatusCode)
			}
		}
	}
}
