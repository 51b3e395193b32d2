package node

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/testutil"
)

// joinMember makes a participant in session sid and returns its id and
// member token.
func joinMember(t *testing.T, n apiNode, sid, name string) (id, tok string) {
	t.Helper()
	base := n.URL() + "/api/v1/sessions/" + sid
	var jt struct{ Token string }
	if code := call(t, "POST", base+"/tokens", map[string]string{"role": "participant"}, &jt); code != 201 {
		t.Fatalf("token: %d", code)
	}
	var joined struct {
		Member struct{ ID string }
		Token  struct{ Token string }
	}
	if code := callAs(t, jt.Token, "POST", base+"/members", map[string]string{"name": name}, &joined); code != 201 {
		t.Fatalf("join: %d", code)
	}
	return joined.Member.ID, joined.Token.Token
}

func getAnon(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReadsNeedCredentials: issue 11 item 8. Without credentials nothing
// about sessions, the node or its metrics is readable; a member sees its
// own session only, and no one else's addresses.
func TestReadsNeedCredentials(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP.MetricsToken = "scrape-token"
	n := startNode(t, cfg)
	var s, other struct{ ID string }
	call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "mine"}, &s)
	call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "theirs"}, &other)
	base := n.URL() + "/api/v1/sessions/" + s.ID
	// An operator's link (a tool at a private address) and a member's own.
	if code := call(t, "POST", base+"/rtp-links", map[string]any{"remote": "127.0.0.1:40990", "kind": "audio"}, nil); code != 201 {
		t.Fatalf("operator link: %d", code)
	}
	me, tok := joinMember(t, n, s.ID, "ann")
	if code := callAs(t, tok, "POST", base+"/rtp-links", map[string]any{"remote": "127.0.0.1:40992", "kind": "audio",
		"member": me}, nil); code != 201 {
		t.Fatalf("member link: %d", code)
	}

	for _, path := range []string{"/api/v1/sessions", "/api/v1/sessions/" + s.ID, "/api/v1/sessions/" + s.ID + "/members",
		"/api/v1/sessions/" + s.ID + "/subgroups", "/api/v1/sessions/" + s.ID + "/floors",
		"/api/v1/sessions/" + s.ID + "/floors/audio", "/api/v1/node", "/metrics"} {
		if code := getAnon(t, n.URL()+path); code != 401 {
			t.Errorf("GET %s without credentials: %d, want 401", path, code)
		}
	}
	if code := getAnon(t, n.URL()+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code := callAs(t, "scrape-token", "GET", n.URL()+"/metrics", nil, nil); code != 200 {
		t.Errorf("/metrics with the metrics token: %d", code)
	}
	if code := callAs(t, tok, "GET", n.URL()+"/api/v1/node", nil, nil); code != 401 && code != 403 {
		t.Errorf("/api/v1/node with a member token: %d, want 401 or 403", code)
	}
	if code := callAs(t, tok, "GET", n.URL()+"/api/v1/sessions/"+other.ID, nil, nil); code != 401 {
		t.Errorf("another session with a member token: %d, want 401", code)
	}

	var list struct {
		Sessions []struct{ ID string }
	}
	if code := callAs(t, tok, "GET", n.URL()+"/api/v1/sessions", nil, &list); code != 200 || len(list.Sessions) != 1 || list.Sessions[0].ID != s.ID {
		t.Errorf("a member's session list: %d %+v, want its session only", code, list.Sessions)
	}
	var sess struct {
		Links []struct {
			Member, Remote string
			Local          struct{ Addr string }
		}
	}
	if code := callAs(t, tok, "GET", base, nil, &sess); code != 200 || len(sess.Links) != 2 {
		t.Fatalf("member GET session: %d, %d links", code, len(sess.Links))
	}
	for _, l := range sess.Links {
		switch {
		case l.Member == me && l.Remote != "127.0.0.1:40992":
			t.Errorf("the member cannot see its own link's address: %+v", l)
		case l.Member != me && (l.Remote != "" || l.Local.Addr != ""):
			t.Errorf("the member sees another link's addresses: %+v", l)
		}
	}
	var full struct{ Links []struct{ Remote string } }
	call(t, "GET", base, nil, &full)
	for _, l := range full.Links {
		if l.Remote == "" {
			t.Error("the operator does not see a link's address")
		}
	}
	// A token in the URL is taken only on the WebSocket upgrade.
	if code := getAnon(t, base+"?token="+tok); code != 401 {
		t.Errorf("?token= on a REST GET: %d, want 401", code)
	}
}

// TestHTTPTimeouts: issue 11 item 9. A body that never comes is cut off
// after the request timeout, and an idle keep-alive connection is closed.
func TestHTTPTimeouts(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP.RequestTimeout = durationOf(time.Second)
	cfg.HTTP.IdleTimeout = durationOf(time.Second)
	n := startNode(t, cfg)
	addr := strings.TrimPrefix(n.URL(), "http://")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nX-API-Key: " + testAPIKey +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("a slow body got no answer: %v", err)
	}
	if !strings.Contains(line, " 400 ") {
		t.Errorf("a slow body: %q, want 400", line)
	}

	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	k.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(k)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("healthz: %q %v", line, err)
	}
	start := time.Now()
	buf := make([]byte, 4096)
	for {
		if _, err := r.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("an idle keep-alive connection stayed open %v", time.Since(start))
			}
			break // closed by the server
		}
	}
}

// TestEventStreamCapsAndPings: issue 11 item 9. A session's event streams
// are capped, and a client that does not answer pings is dropped.
func TestEventStreamCapsAndPings(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP.WSMaxPerSession = 2
	cfg.HTTP.WSPing = durationOf(time.Second)
	n := startNode(t, cfg)
	var s struct{ ID string }
	call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "ws"}, &s)
	_, tok := joinMember(t, n, s.ID, "ann")
	dialWS(t, n, s.ID, tok)
	u := "ws" + strings.TrimPrefix(n.URL(), "http") + "/api/v1/sessions/" + s.ID + "/events"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The second stream never reads, so it never answers a ping.
	mute, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer mute.CloseNow()
	_, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("a third stream on the session: %v %v, want 503", resp, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the silent stream to be dropped", func() bool {
		return metricValue(t, n, `convene_api_ws_refused_total{reason="ping_timeout"}`) >= 1
	})
	// Its slot is free again.
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatalf("a stream after the silent one was dropped: %v", err)
	}
	c.CloseNow()
}

func durationOf(d time.Duration) config.Duration { return config.Duration(d) }

// metricValue reads one sample (name{labels} as /metrics writes it) from
// the node's /metrics; 0 when absent.
func metricValue(t *testing.T, n *Node, sample string) float64 {
	t.Helper()
	resp, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestJoinTokensAndCaps: issue 11 item 10. A join token admits at most its
// max_uses members and none once revoked; a session admits at most
// sessions.max_members members and the node at most sessions.max sessions;
// a member token dies with its member.
func TestJoinTokensAndCaps(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Sessions.Max, cfg.Sessions.MaxMembers = 2, 3
	n := startNode(t, cfg)
	var s struct{ ID string }
	call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "a"}, &s)
	base := n.URL() + "/api/v1/sessions/" + s.ID
	var jt struct{ Token, ID string }
	if code := call(t, "POST", base+"/tokens", map[string]any{"role": "participant", "max_uses": 2}, &jt); code != 201 || jt.ID == "" {
		t.Fatalf("token: %d %+v", code, jt)
	}
	var joined struct {
		Member struct{ ID string }
		Token  struct{ Token string }
	}
	for i := range 2 {
		if code := callAs(t, jt.Token, "POST", base+"/members", map[string]string{"name": "p"}, &joined); code != 201 {
			t.Fatalf("join %d: %d", i, code)
		}
	}
	if code := callAs(t, jt.Token, "POST", base+"/members", map[string]string{"name": "p"}, nil); code != 403 {
		t.Errorf("a third join with a 2-use token: %d, want 403", code)
	}
	var other struct{ Token, ID string }
	call(t, "POST", base+"/tokens", map[string]any{"role": "listener"}, &other)
	if code := call(t, "DELETE", base+"/tokens/"+other.ID, nil, nil); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code := callAs(t, other.Token, "POST", base+"/members", map[string]string{"name": "l"}, nil); code != 403 {
		t.Errorf("join with a revoked token: %d, want 403", code)
	}
	var list struct {
		Tokens []struct {
			ID      string
			Uses    int
			Revoked bool
		}
	}
	if code := call(t, "GET", base+"/tokens", nil, &list); code != 200 || len(list.Tokens) != 2 ||
		list.Tokens[0].Uses != 2 || !list.Tokens[1].Revoked {
		t.Errorf("token list: %d %+v", code, list.Tokens)
	}
	// The member cap: the operator adds the third, a fourth is refused.
	if code := call(t, "POST", base+"/members", map[string]string{"name": "c", "role": "chair"}, nil); code != 201 {
		t.Fatalf("third member: %d", code)
	}
	if code := call(t, "POST", base+"/members", map[string]string{"name": "d", "role": "chair"}, nil); code != 429 {
		t.Errorf("fourth member over sessions.max_members=3: %d, want 429", code)
	}
	// A member token stops working when its member leaves.
	tok := joined.Token.Token
	if code := callAs(t, tok, "GET", base, nil, nil); code != 200 {
		t.Fatalf("member reads its session: %d", code)
	}
	if code := call(t, "DELETE", base+"/members/"+joined.Member.ID, nil, nil); code != 204 && code != 200 {
		t.Fatalf("remove member: %d", code)
	}
	if code := callAs(t, tok, "GET", base, nil, nil); code != 401 {
		t.Errorf("a departed member's token: %d, want 401", code)
	}
	// The sessions cap.
	call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "b"}, nil)
	if code := call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "c"}, nil); code != 429 {
		t.Errorf("a third session over sessions.max=2: %d, want 429", code)
	}
}

// A member's event stream ends when the member is removed: its token no
// longer admits it, so neither does the stream it opened before.
func TestEventStreamEndsWhenTheMemberLeaves(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "bye")
	id, tok := joinMember(t, n, s.ID, "ann")
	w := dialWS(t, n, s.ID, tok)
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+s.ID+"/members/"+id, nil, nil); code != 204 && code != 200 {
		t.Fatalf("remove member: %d", code)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-w.frames:
			if !open {
				return
			}
		case <-timeout:
			t.Fatal("the removed member's event stream is still open")
		}
	}
}
