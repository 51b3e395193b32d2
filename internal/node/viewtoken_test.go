package node

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/testutil"
)

// requestAs does a request with a bearer token and a raw body; it returns
// the status and the body.
func requestAs(t *testing.T, tok, method, url, ctype, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestViewTokenIssuance: a chair issues view tokens for its own session
// within a chair's caps (a day, 1000 uses, 50 live tokens in the session),
// and so does the operator (within the same caps, counting its view
// tokens); a participant issues none, nor does a chair of another session.
func TestViewTokenIssuance(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "view")
	other := createSession(t, n, "other")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	_, ctok := joinAs(t, n, s.ID, "Chris", "chair")
	_, ptok := joinAs(t, n, s.ID, "Pat", "participant")
	_, octok := joinAs(t, n, other.ID, "Olga", "chair")

	var vt struct {
		Token, ID, Role string
		MaxUses         int `json:"max_uses"`
	}
	if code := callAs(t, ctok, "POST", base+"/tokens", map[string]any{"role": "viewer", "ttl_seconds": 86400, "max_uses": 1000}, &vt); code != 201 || vt.Role != "viewer" || vt.ID == "" || vt.MaxUses != 1000 {
		t.Fatalf("the chair issues a view token: %d %+v", code, vt)
	}
	for name, c := range map[string]struct {
		tok  string
		body map[string]any
		want int
	}{
		"chair, a day and a second":    {ctok, map[string]any{"role": "viewer", "ttl_seconds": 86401}, 400},
		"chair, 1001 uses":             {ctok, map[string]any{"role": "viewer", "max_uses": 1001}, 400},
		"operator, a day and a second": {"", map[string]any{"role": "viewer", "ttl_seconds": 86401}, 400},
		"operator, 1001 uses":          {"", map[string]any{"role": "viewer", "max_uses": 1001}, 400},
		"participant":                  {ptok, map[string]any{"role": "viewer"}, 403},
		"another session's chair":      {octok, map[string]any{"role": "viewer"}, 401},
		"the view token itself":        {vt.Token, map[string]any{"role": "viewer"}, 403},
	} {
		var code int
		if c.tok == "" {
			code = call(t, "POST", base+"/tokens", c.body, nil)
		} else {
			code = callAs(t, c.tok, "POST", base+"/tokens", c.body, nil)
		}
		if code != c.want {
			t.Errorf("%s: %d, want %d", name, code, c.want)
		}
	}
	// The operator's view tokens: up to 50 live ones.
	for i := range 49 {
		if code := call(t, "POST", base+"/tokens", map[string]any{"role": "viewer"}, nil); code != 201 {
			t.Fatalf("operator's view token %d: %d", i+2, code)
		}
	}
	if code := call(t, "POST", base+"/tokens", map[string]any{"role": "viewer"}, nil); code != 429 {
		t.Errorf("the operator's 51st live view token: %d, want 429", code)
	}
	// The operator's other tokens are not bounded so; a chair's are.
	if code := call(t, "POST", base+"/tokens", map[string]any{"role": "listener"}, nil); code != 201 {
		t.Errorf("the operator's listener token past 50 view tokens: %d, want 201", code)
	}
	if code := callAs(t, ctok, "POST", base+"/tokens", map[string]any{"role": "viewer"}, nil); code != 429 {
		t.Errorf("the chair's view token past 50 live tokens: %d, want 429", code)
	}
	// Revoking one makes room again.
	if code := callAs(t, ctok, "DELETE", base+"/tokens/"+vt.ID, nil, nil); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code := call(t, "POST", base+"/tokens", map[string]any{"role": "viewer"}, nil); code != 201 {
		t.Errorf("a view token after a revocation: %d, want 201", code)
	}
	var list struct{ Tokens []struct{ ID, Role string } }
	// Two join tokens of the members, 51 view tokens and a listener's.
	if code := callAs(t, ctok, "GET", base+"/tokens", nil, &list); code != 200 || len(list.Tokens) != 54 {
		t.Fatalf("token list: %d, %d tokens", code, len(list.Tokens))
	}
	views := 0
	for _, tk := range list.Tokens {
		if tk.Role == "viewer" {
			views++
		}
	}
	if views != 51 {
		t.Errorf("%d view tokens listed, want 51", views)
	}
}

// TestViewTokenOnlyWatches: a view token is refused with 403 and the
// reason everywhere but the HLS view route — joining, the session and its
// members, signalling and chat sockets, WHIP and WHEP, links, floors,
// events, tokens, recordings, HLS control, thumbnails.
func TestViewTokenOnlyWatches(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "view")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	_, ctok := joinAs(t, n, s.ID, "Chris", "chair")
	mid, _ := joinAs(t, n, s.ID, "Pat", "participant")
	var vt struct{ Token string }
	if code := callAs(t, ctok, "POST", base+"/tokens", map[string]any{"role": "viewer"}, &vt); code != 201 {
		t.Fatalf("view token: %d", code)
	}
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
	for _, c := range []struct{ method, path, ctype, body string }{
		{"POST", "/members", "application/json", `{"name":"sneaky"}`},
		{"POST", "/members", "application/json", `{"name":"sneaky","role":"listener"}`},
		{"GET", "", "", ""},
		{"GET", "/members", "", ""},
		{"GET", "/members/" + mid, "", ""},
		{"DELETE", "/members/" + mid, "", ""},
		{"POST", "/whip", "application/sdp", sdp},
		{"POST", "/whep", "application/sdp", sdp},
		{"POST", "/rtp-links", "application/json", `{"remote":"127.0.0.1:40000","kind":"audio"}`},
		{"GET", "/floors", "", ""},
		{"POST", "/floors/audio/request", "application/json", `{}`},
		{"GET", "/events", "", ""},
		{"GET", "/conversation", "", ""},
		{"POST", "/tokens", "application/json", `{"role":"listener"}`},
		{"GET", "/tokens", "", ""},
		{"POST", "/hls", "application/json", `{}`},
		{"GET", "/hls", "", ""},
		{"GET", "/recordings", "", ""},
		{"GET", "/subgroups", "", ""},
		{"GET", "/tracks/x/thumbnail.jpg", "", ""},
		{"GET", "/composites", "", ""},
	} {
		code, body := requestAs(t, vt.Token, c.method, base+c.path, c.ctype, c.body)
		if code != 403 || !strings.Contains(body, "view_token") || !strings.Contains(body, "only watches") {
			t.Errorf("%s %s with a view token: %d %s, want 403 view_token", c.method, c.path, code, body)
		}
	}
	if code, body := requestAs(t, vt.Token, "GET", n.URL()+"/api/v1/sessions", "", ""); code != 403 {
		t.Errorf("listing sessions with a view token: %d %s, want 403", code, body)
	}
	// The sockets: signalling, events and chat refuse the upgrade.
	for _, path := range []string{"/rtc", "/events", "/conversation"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		u := "ws" + strings.TrimPrefix(base, "http") + path + "?token=" + vt.Token
		c, resp, err := websocket.Dial(ctx, u, nil)
		cancel()
		if err == nil {
			c.CloseNow()
			t.Errorf("%s socket with a view token: opened", path)
			continue
		}
		if resp == nil || resp.StatusCode != 403 {
			t.Errorf("%s socket with a view token: %v, want 403", path, err)
		}
	}
	var ms struct{ Members []struct{ ID string } }
	if code := call(t, "GET", base+"/members", nil, &ms); code != 200 || len(ms.Members) != 2 {
		t.Errorf("members after the view token's tries: %d %d, want the two who joined", code, len(ms.Members))
	}
}

// TestViewTokenRevocationStopsPlayback: a view token plays the session's
// HLS stream under a signed prefix that carries its id; revoking it
// refuses the playlist and segments with 401 within a few seconds, while a
// second view token of the session plays on. A member token's prefix
// carries the member's id and stops once the member was removed.
func TestViewTokenRevocationStopsPlayback(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "hls")
	sendFFmpeg(t, n, s.ID, 60*time.Second)
	base := n.URL() + "/api/v1/sessions/" + s.ID
	_, ctok := joinAs(t, n, s.ID, "Chris", "chair")
	var info struct{ Playlist string }
	if code := callAs(t, ctok, "POST", base+"/hls", map[string]any{}, &info); code != 201 {
		t.Fatalf("the chair starts HLS: %d", code)
	}
	viewToken := func() (tok, id string) {
		var vt struct{ Token, ID string }
		if code := callAs(t, ctok, "POST", base+"/tokens", map[string]any{"role": "viewer", "ttl_seconds": 43200}, &vt); code != 201 {
			t.Fatalf("view token: %d", code)
		}
		return vt.Token, vt.ID
	}
	tok, id := viewToken()
	keep, keepID := viewToken()
	open := func(tok string) string {
		code, h, b := get(t, noRedirect, n.URL()+info.Playlist+"?token="+tok)
		if code != 302 {
			t.Fatalf("viewing with a view token: %d %s", code, b)
		}
		return n.URL() + h.Get("Location")
	}
	signed, kept := open(tok), open(keep)
	if !strings.Contains(signed, "."+id+".") || !strings.Contains(kept, "."+keepID+".") {
		t.Errorf("the signed prefixes %s and %s do not carry their tokens' ids", signed, kept)
	}
	p := waitHLSMedia(t, strings.TrimSuffix(signed, "index.m3u8"), "video1_stream.m3u8", 2, 40*time.Second)
	seg := strings.TrimSuffix(signed, "index.m3u8") + p.segments[len(p.segments)-1]
	if code, _, _ := get(t, http.DefaultClient, seg); code != 200 {
		t.Fatalf("a segment: %d", code)
	}
	// A prefix whose key was swapped for the other token's is forged.
	swapped := strings.Replace(signed, "."+id+".", "."+keepID+".", 1)
	if code, _, _ := get(t, http.DefaultClient, swapped); code != 403 {
		t.Errorf("a prefix with another token's id: %d, want 403", code)
	}

	if code := callAs(t, ctok, "DELETE", base+"/tokens/"+id, nil, nil); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	revoked := time.Now()
	testutil.WaitFor(t, 5*time.Second, "the revoked link's playlist refused", func() bool {
		code, _, _ := get(t, http.DefaultClient, signed)
		return code == 401
	})
	t.Logf("playlist refused %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	if code, _, b := get(t, http.DefaultClient, seg); code != 401 || !strings.Contains(string(b), "revoked") {
		t.Errorf("a segment of the revoked link: %d %s, want 401", code, b)
	}
	if code, _, _ := get(t, noRedirect, n.URL()+info.Playlist+"?token="+tok); code != 401 {
		t.Errorf("opening the revoked link again: %d, want 401", code)
	}
	if code, _, _ := get(t, http.DefaultClient, kept); code != 200 {
		t.Errorf("the other view link's playlist: %d, want 200", code)
	}
	// It stays refused (the verdict is final, not a cache entry that
	// lapses).
	time.Sleep(2500 * time.Millisecond)
	if code, _, _ := get(t, http.DefaultClient, signed); code != 401 {
		t.Errorf("the revoked link's playlist later: %d, want 401", code)
	}

	// A member's token opens the stream under a prefix that carries the
	// member's id, and stops playing once the member was removed.
	mid, mtok := joinAs(t, n, s.ID, "Pat", "participant")
	member := open(mtok)
	if !strings.Contains(member, "."+mid+".") {
		t.Errorf("the member's prefix %s does not carry its id %s", member, mid)
	}
	if code, _, _ := get(t, http.DefaultClient, member); code != 200 {
		t.Fatalf("the member's playlist: %d", code)
	}
	if code := callAs(t, ctok, "DELETE", base+"/members/"+mid, nil, nil); code != 204 {
		t.Fatalf("the chair removes the member: %d", code)
	}
	testutil.WaitFor(t, 5*time.Second, "the removed member's playlist refused", func() bool {
		code, _, _ := get(t, http.DefaultClient, member)
		return code == 401
	})
	if code, _, _ := get(t, http.DefaultClient, kept); code != 200 {
		t.Errorf("the view link's playlist after the member left: %d, want 200", code)
	}
}
