package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/sfu"
	"github.com/convene/convene/internal/testutil"
)

// refusal is an over-capacity 503 as a client reads it.
type refusal struct {
	Status     int
	RetryAfter string
	Error      struct{ Code, Message string }
	Alts       []capacity.Alternative `json:"alternatives"`
}

// postRefused POSTs a receiving audio link to sid on n and returns the
// answer, which the caller expects to be a refusal.
func postLink(t *testing.T, n *Node, sid string) refusal {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
	req, _ := http.NewRequest("POST", n.URL()+"/api/v1/sessions/"+sid+"/rtp-links", strings.NewReader(string(b)))
	req.Header.Set("X-API-Key", testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := refusal{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, data, err)
	}
	return r
}

// TestClusterRefusalNamesANodeWithRoom (issue 19): node A delivers at most
// 100 packets/s, node B ten million; both on three nats-servers and one
// PostgreSQL catalog with one token secret. A full on A:
//   - a link is refused with 503, Retry-After and B as the alternative (its
//     URL, SIP address, room, and that A's tokens are valid there); the
//     same link through B is admitted;
//   - a browser's join is refused with an error frame naming B, and the
//     same member token joins through B;
//   - a phone dialling into the session through A gets 302 with B's SIP
//     address as the Contact.
//
// Once B drains, A names nobody: 503 with Retry-After alone, and SIP 503.
func TestClusterRefusalNamesANodeWithRoom(t *testing.T) {
	testutil.NeedBinary(t, "sipp")
	sipDomain := func(c *config.Config) { c.SIP.Domain = "convene.test" }
	c := startCluster(t)
	a := c.start(t, "node-a", sipDomain, func(c *config.Config) { c.Capacity.PPS, c.Capacity.Headroom = 100, 0 })
	b := c.start(t, "node-b", sipDomain)
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if got := a.alternatives(1); len(got) != 1 || got[0].Node != "node-b" {
			return "node A's registry does not see node B with room yet"
		}
		return ""
	})

	s := createSession(t, a, "full on A")
	addLink(t, a, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "sendonly"})
	for range 2 { // 2 × 50 packets/s: A is full
		addLink(t, a, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
	}
	r := postLink(t, a, s.ID)
	if r.Status != 503 || r.Error.Code != "over_capacity" || r.RetryAfter == "" {
		t.Fatalf("a link on full node A: %+v, want 503 over_capacity with Retry-After", r)
	}
	want := capacity.Alternative{Node: "node-b", URL: b.URL(), SIP: b.SIPAddr(), TokenValid: true}
	if len(r.Alts) != 1 || r.Alts[0].RoomPPS < 50 {
		t.Fatalf("alternatives %+v, want node B with room for 50 packets/s", r.Alts)
	}
	if got := r.Alts[0]; got.Node != want.Node || got.URL != want.URL || got.SIP != want.SIP || !got.TokenValid {
		t.Errorf("alternative %+v, want %+v", got, want)
	}
	if !strings.Contains(r.Error.Message, "node-b") {
		t.Errorf("reason %q does not name node B", r.Error.Message)
	}
	if r := postLink(t, b, s.ID); r.Status != 201 {
		t.Errorf("the same link through node B: %+v, want 201", r)
	}

	// A browser: refused on A with B named, joins through B with the same
	// member token.
	_, tok := joinMember(t, a, s.ID, "Ada")
	if f := errorFrame(t, a, s.ID, tok); f.Code != "over_capacity" || len(f.Alternatives) != 1 || f.Alternatives[0].URL != b.URL() || !f.Alternatives[0].TokenValid {
		t.Fatalf("error frame %+v, want over_capacity naming node B", f)
	}
	cl := dialRTC(t, b, s.ID, tok, rtctest.Options{}) // its token is valid there
	cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A phone: 302 to B's SIP server.
	if _, err := a.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	phoneMoved(t, ctx, a, b, s.ID)

	// B drains: A names nobody.
	if err := b.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if got := a.alternatives(1); len(got) != 0 {
			return "node A still names node B after it drained"
		}
		return ""
	})
	r = postLink(t, a, s.ID)
	if r.Status != 503 || r.RetryAfter == "" || r.Alts != nil || strings.Contains(r.Error.Message, "node-b") {
		t.Errorf("after B drained: %+v, want 503 with Retry-After and no alternatives", r)
	}
	phone := startSIPpAs(t, ctx, a, "dialin_busy.xml", s.ID, "carol", carolPass, 20*time.Second, "-trace_msg")
	phone.wait(t)
	if msgs := phone.messages(t); !strings.Contains(msgs, "SIP/2.0 503") || strings.Contains(msgs, "SIP/2.0 302") {
		t.Errorf("after B drained the phone was not refused with 503:\n%s", msgs)
	}
}

// TestPublicAddresses: a node publishes http.public_url (without a
// trailing slash) when set, else its listener's URL when that is a
// specific IP, and none on all interfaces; its SIP server's address; the
// ID of its token key. A lone node names no alternatives.
func TestPublicAddresses(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP.PublicURL = "https://node-a.example.org/"
	n := startNode(t, cfg)
	if p := n.public("k1"); p.URL != "https://node-a.example.org" || p.SIP != n.SIPAddr() || p.TokenKey != "k1" {
		t.Errorf("public %+v", p)
	}
	if p := n.public(""); p.TokenKey != "" {
		t.Errorf("token key %q", p.TokenKey)
	}
	cfg = testConfig(t, t.TempDir())
	cfg.HTTP.Addr = "0.0.0.0:0"
	m := startNode(t, cfg)
	if p := m.public("k"); p.URL != "" {
		t.Errorf("a node on all interfaces without http.public_url publishes %q", p.URL)
	}
	if got := m.alternatives(1); len(got) != 0 {
		t.Errorf("a lone node names %+v", got)
	}
}

// errorFrame opens a member's signalling socket on n and returns the
// error frame it is answered with instead of a welcome.
func errorFrame(t *testing.T, n apiNode, sid, tok string) sfu.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := rtctest.Dial(ctx, n.URL(), sid, tok, rtctest.Options{})
	var ff *rtctest.FirstFrameError
	if !errors.As(err, &ff) {
		if cl != nil {
			cl.Close()
		}
		t.Fatalf("a member's socket on %s: %v, want an error frame", n.URL(), err)
	}
	return ff.Frame
}

// TestPhoneMovedWhereAMixerIsFree: node A runs as many mixers as it may
// (mixer.max 1, taken by another session's mixed link); a phone dialling
// into a session through A needs a mixer of its own, so A sends it with a
// 302 to node B, whose heartbeat says it has mixers free (without: 503).
func TestPhoneMovedWhereAMixerIsFree(t *testing.T) {
	testutil.NeedBinary(t, "sipp")
	sipDomain := func(c *config.Config) { c.SIP.Domain = "convene.test" }
	c := startCluster(t)
	a := c.start(t, "node-a", sipDomain, func(c *config.Config) { c.Mixer.Max = 1 })
	b := c.start(t, "node-b", sipDomain)
	busy := createSession(t, a, "A's one mixer")
	addLink(t, a, busy.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "recvonly", "mix": "PCMU"})
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if a.mixers.Free() != 0 {
			return fmt.Sprintf("node A has %d mixers free", a.mixers.Free())
		}
		if got := a.registry.WithMixerRoom("node-a"); len(got) != 1 || got[0].ID != "node-b" {
			return fmt.Sprintf("node A's registry names %v for a mixer", got)
		}
		return ""
	})

	s := createSession(t, a, "a phone's session")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	phoneMoved(t, ctx, a, b, s.ID)
	var got sessionJSON
	call(t, "GET", a.URL()+"/api/v1/sessions/"+s.ID, nil, &got)
	if len(got.Links) != 0 {
		t.Errorf("the moved phone still has links on A: %+v", got.Links)
	}
}

// phoneMoved dials into session sid through node from as carol and checks
// that from sent the phone to node to's SIP server with a 302, its first
// call counted moved.
func phoneMoved(t *testing.T, ctx context.Context, from, to *Node, sid string) {
	t.Helper()
	phone := startSIPpAs(t, ctx, from, "dialin_busy.xml", sid, "carol", carolPass, 20*time.Second, "-trace_msg")
	phone.wait(t)
	msgs := phone.messages(t)
	if !strings.Contains(msgs, "SIP/2.0 302 Moved Temporarily") || !strings.Contains(msgs, "Contact: <sip:"+sid+"@"+to.SIPAddr()+">") {
		t.Errorf("the phone was not moved to node %s (%s):\n%s", to.cfg.NodeID, to.SIPAddr(), msgs)
	}
	if v := metricValue(t, from, `convene_sip_calls_total{result="conference_moved"}`); v != 1 {
		t.Errorf("calls moved: %v, want 1", v)
	}
}
