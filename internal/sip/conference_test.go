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
	"github.com/pion/sdp/v3"
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
	refuse error    // Join's answer when set
	kept   []Dialog // what Keep was given
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
		Keep: func(d Dialog) {
			c.mu.Lock()
			c.kept = append(c.kept, d)
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

// TestOfferWithVideo: a phone's offer of audio and video: the node takes
// the first video codec it forwards (VP8, H.264 in packetization mode 1),
// and its answer has one m-line for each offered one, in order — the video
// at the node's port or, refused, at port 0.
func TestOfferWithVideo(t *testing.T) {
	head := "v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n"
	audio := "m=audio 4000 RTP/AVP 0 101\r\na=rtpmap:101 telephone-event/8000\r\n"
	for _, c := range []struct {
		name, video string
		codec       string
		pt          uint8
	}{
		{"VP8", "m=video 4002 RTP/AVP 100\r\na=rtpmap:100 VP8/90000\r\n", "VP8/90000", 100},
		{"H.264 mode 1 after mode 0", "m=video 4002 RTP/AVP 97 99\r\na=rtpmap:97 H264/90000\r\na=fmtp:97 profile-level-id=42e01f\r\n" +
			"a=rtpmap:99 H264/90000\r\na=fmtp:99 profile-level-id=42e01f;packetization-mode=1\r\n", "H264/90000", 99},
		{"H.263 only", "m=video 4002 RTP/AVP 34\r\n", "", 0},
		{"H.264 mode 0 only", "m=video 4002 RTP/AVP 97\r\na=rtpmap:97 H264/90000\r\n", "", 0},
		{"disabled", "m=video 0 RTP/AVP 100\r\na=rtpmap:100 VP8/90000\r\n", "", 0},
	} {
		o, err := parseOffer([]byte(head + audio + c.video))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := o.video >= 0; got != (c.codec != "") || (got && (o.vid.Codec != c.codec || o.vid.PT != c.pt || o.vid.Media.String() != "192.0.2.1:4002")) {
			t.Errorf("%s: video %d %+v, want %q PT %d", c.name, o.video, o.vid, c.codec, c.pt)
		}
		for _, video := range []netip.AddrPort{{}, netip.MustParseAddrPort("127.0.0.1:4100")} {
			ans := answerSDP(o, netip.MustParseAddrPort("127.0.0.1:4000"), video, "sendrecv", 1)
			var d sdp.SessionDescription
			if err := d.Unmarshal(ans); err != nil || len(d.MediaDescriptions) != 2 {
				t.Fatalf("%s: answer %q: %v", c.name, ans, err)
			}
			v := d.MediaDescriptions[1]
			want := 0
			if video.IsValid() && c.codec != "" {
				want = 4100
			}
			if v.MediaName.Media != "video" || v.MediaName.Port.Value != want {
				t.Errorf("%s: answer's video line %v, want port %d", c.name, v.MediaName, want)
			}
			if want != 0 && v.MediaName.Formats[0] != strconv.Itoa(int(c.pt)) {
				t.Errorf("%s: answer's video format %v, want %d", c.name, v.MediaName.Formats, c.pt)
			}
		}
	}
	// Video before audio, and a third stream: the answer keeps the order.
	o, err := parseOffer([]byte(head + "m=video 4002 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\n" + audio +
		"m=application 5000 UDP/BFCP *\r\n"))
	if err != nil || o.audio != 1 || o.video != 0 {
		t.Fatalf("offer %+v %v", o, err)
	}
	ans := string(answerSDP(o, netip.MustParseAddrPort("127.0.0.1:4000"), netip.MustParseAddrPort("127.0.0.1:4000"), "recvonly", 1))
	iv, ia, ix := strings.Index(ans, "m=video 4000"), strings.Index(ans, "m=audio 4000"), strings.Index(ans, "m=application 0 UDP/BFCP *")
	if iv < 0 || ia < iv || ix < ia || !strings.Contains(ans, "a=recvonly") {
		t.Errorf("answer %q", ans)
	}
}

// FuzzParseOffer: no SDP crashes the offer parser; what it accepts has an
// address, a port and a codec (and a video stream it takes has a codec the
// node forwards), and the answer to it parses, with one m-line for each
// offered one.
func FuzzParseOffer(f *testing.F) {
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0 101\r\na=rtpmap:101 telephone-event/8000\r\n"))
	f.Add([]byte("v=0\r\nm=audio 1 RTP/AVP 96\r\nc=IN IP6 ::1\r\na=rtpmap:96 opus/48000/2\r\n"))
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0\r\n" +
		"m=video 49172 RTP/AVP 99 100\r\na=rtpmap:99 H264/90000\r\na=fmtp:99 profile-level-id=42e01f;packetization-mode=1\r\na=rtpmap:100 VP8/90000\r\n" +
		"m=application 0 UDP/BFCP *\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseOffer(b)
		if err != nil {
			return
		}
		if !o.remote.IsValid() || o.remote.Port() == 0 || o.codec == "" {
			t.Fatalf("accepted %+v", o)
		}
		if o.video >= 0 && (o.vid.Codec != "VP8/90000" && o.vid.Codec != "H264/90000" || o.vid.PT < 96 || o.vid.PT > 127 || !o.vid.Media.IsValid()) {
			t.Fatalf("accepted video %+v", o.vid)
		}
		for _, video := range []netip.AddrPort{{}, netip.MustParseAddrPort("127.0.0.1:4002")} {
			ans := answerSDP(o, netip.MustParseAddrPort("127.0.0.1:4000"), video, "sendrecv", 1)
			var d sdp.SessionDescription
			if err := d.Unmarshal(ans); err != nil {
				t.Fatalf("answer %q does not parse: %v", ans, err)
			}
			if len(d.MediaDescriptions) != len(o.lines) {
				t.Fatalf("answer has %d m-lines, the offer %d", len(d.MediaDescriptions), len(o.lines))
			}
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
