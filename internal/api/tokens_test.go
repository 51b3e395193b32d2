package api

import (
	"net/http"
	"testing"
)

// TestChairIssuesListenerTokens: a chair of the session issues listener
// join tokens (a viewer link) within its own bounds; chair and participant
// tokens stay the operator's, as do other sessions' tokens; participants,
// listeners and bare join tokens issue none; past chairMaxLiveTokens live
// tokens a chair is refused until one is revoked.
func TestChairIssuesListenerTokens(t *testing.T) {
	srv, _ := newTestServer(t)
	_, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"a"}`)
	sid := s["id"].(string)
	_, s2 := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"b"}`)
	_, chair := joinAs(t, srv, sid, "chair", "c")
	_, part := joinAs(t, srv, sid, "participant", "p")
	_, listener := joinAs(t, srv, sid, "listener", "l")
	_, join := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/tokens", "", `{"role":"listener"}`)
	tokens := "/api/v1/sessions/" + sid + "/tokens"

	code, tok := doAs(t, srv, chair, "POST", tokens, `{"role":"listener","ttl_seconds":43200}`)
	if code != 201 || tok["role"] != "listener" || tok["session_id"] != sid {
		t.Fatalf("a chair issues a listener token: %d %v", code, tok)
	}
	if code, out := doAs(t, srv, tok["token"].(string), "POST", "/api/v1/sessions/"+sid+"/members", `{"name":"v"}`); code != 201 || out["member"].(map[string]any)["role"] != "listener" {
		t.Errorf("joining with the chair's listener token: %d %v", code, out)
	}
	cases := []struct {
		who, cred, path, body string
		status                int
	}{
		{"chair", chair, tokens, `{"role":"chair"}`, 403},
		{"chair", chair, tokens, `{"role":"participant"}`, 403},
		{"chair", chair, tokens, `{"role":"listener","ttl_seconds":86401}`, 400},
		{"chair", chair, tokens, `{"role":"listener","max_uses":1001}`, 400},
		{"chair", chair, tokens, `{"role":"king"}`, 400},
		{"chair of another session", chair, "/api/v1/sessions/" + s2["id"].(string) + "/tokens", `{"role":"listener"}`, 401},
		{"participant", part, tokens, `{"role":"listener"}`, 403},
		{"listener", listener, tokens, `{"role":"listener"}`, 403},
		{"join token", join["token"].(string), tokens, `{"role":"listener"}`, 401},
		{"nobody", "", tokens, `{"role":"listener"}`, 401},
	}
	for _, c := range cases {
		if code, out := doAs(t, srv, c.cred, "POST", c.path, c.body); code != c.status {
			t.Errorf("%s issues %s: %d %v, want %d", c.who, c.body, code, out, c.status)
		}
	}
	if code, out := do(t, srv, "POST", tokens, "", `{"role":"participant","ttl_seconds":604800,"max_uses":5000}`); code != 201 {
		t.Errorf("the operator's bounds are the operator's: %d %v", code, out)
	}

	// The session has 6 live tokens now (3 joins, join, the chair's, the
	// operator's); the chair may add up to chairMaxLiveTokens.
	var last string
	for i := 6; i < chairMaxLiveTokens; i++ {
		code, tok := doAs(t, srv, chair, "POST", tokens, `{"role":"listener"}`)
		if code != 201 {
			t.Fatalf("live token %d: %d %v", i+1, code, tok)
		}
		last = tok["id"].(string)
	}
	if code, out := doAs(t, srv, chair, "POST", tokens, `{"role":"listener"}`); code != http.StatusTooManyRequests || errCode(out) != "limit_reached" {
		t.Fatalf("token %d from a chair: %d %v, want 429", chairMaxLiveTokens+1, code, out)
	}
	if code, out := do(t, srv, "POST", tokens, "", `{"role":"listener"}`); code != 201 {
		t.Errorf("the operator is not held to the chair's count: %d %v", code, out)
	}
	if code, _ := doAs(t, srv, chair, "DELETE", tokens+"/"+last, ""); code != 204 {
		t.Fatalf("the chair revokes a token: %d", code)
	}
	// The operator's extra one keeps the count at the cap.
	if code, _ := doAs(t, srv, chair, "POST", tokens, `{"role":"listener"}`); code != http.StatusTooManyRequests {
		t.Errorf("after one revoked and one more from the operator: %d, want 429 (%d live)", code, chairMaxLiveTokens)
	}
}

// TestViewerTokenRevoked: an HLS viewer's join token is checked against
// its record, so a revoked viewer link lets no new viewer in (this server
// streams no HLS: a valid token gets as far as 503).
func TestViewerTokenRevoked(t *testing.T) {
	srv, _ := newTestServer(t)
	_, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"a"}`)
	sid := s["id"].(string)
	_, tok := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/tokens", "", `{"role":"listener"}`)
	view := func() int {
		resp, err := http.Get(srv.URL + "/hls/" + sid + "/index.m3u8?token=" + tok["token"].(string))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := view(); code != http.StatusServiceUnavailable {
		t.Fatalf("a valid viewer token: %d, want 503 (no HLS here)", code)
	}
	if code, _ := do(t, srv, "DELETE", "/api/v1/sessions/"+sid+"/tokens/"+tok["id"].(string), "", ""); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code := view(); code != http.StatusUnauthorized {
		t.Errorf("a revoked viewer token: %d, want 401", code)
	}
}
