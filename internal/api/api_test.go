package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/udpmux"
)

// testKey is the operator API key of the test server; do sends it.
const testKey = "test-key"

func newTestServer(t *testing.T) (*httptest.Server, *catalog.Store) {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	var socks rtplink.Sockets
	for _, p := range []**udpmux.Socket{&socks.RTP, &socks.RTCP} {
		s, err := udpmux.Listen("127.0.0.1:0", udpmux.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		*p = s
	}
	hub := events.New(events.Options{})
	svc := session.New(session.Options{Catalog: cat, Broker: broker.New(), Sockets: socks, Events: hub})
	t.Cleanup(svc.Drain)
	srv := httptest.NewServer(New(Options{Sessions: svc, Node: NodeInfo{ID: "n1"}, Events: hub,
		Access: &Access{Keys: auth.NewKeys(testKey), Tokens: auth.NewSigner([]byte("test-secret"), nil)}}))
	t.Cleanup(srv.Close)
	return srv, cat
}

func do(t *testing.T, srv *httptest.Server, method, path, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s answered non-JSON: %s", method, path, data)
		}
	}
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestBadRequests(t *testing.T) {
	srv, cat := newTestServer(t)
	code, s := do(t, srv, "POST", "/api/v1/sessions", "application/json", `{"name":"ok"}`)
	if code != 201 {
		t.Fatalf("create: %d", code)
	}
	sid := s["id"].(string)
	big := `{"name":"` + strings.Repeat("x", 70<<10) + `"}`
	cases := []struct {
		method, path, ct, body string
		status                 int
		code                   string
	}{
		{"POST", "/api/v1/sessions", "application/json", `{"name":`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "application/json", `{"nmae":"x"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "application/json", `{"name":5}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "application/json", `{"name":"a"} {"name":"b"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "text/plain", `{"name":"a"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "application/json", `{"name":"` + strings.Repeat("n", 201) + `"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions", "application/json", big, 413, "invalid_request"},
		{"GET", "/api/v1/sessions/nope", "", "", 404, "not_found"},
		{"DELETE", "/api/v1/sessions/nope", "", "", 404, "not_found"},
		{"POST", "/api/v1/sessions/nope/rtp-links", "application/json", `{"remote":"127.0.0.1:5000","kind":"audio"}`, 404, "not_found"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"127.0.0.1","kind":"audio"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"example.com:5000","kind":"audio"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"127.0.0.1:0","kind":"audio"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"127.0.0.1:5000","kind":"smell"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"127.0.0.1:5000","kind":"audio","direction":"up"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/rtp-links", "application/json", `{"remote":"127.0.0.1:5000","kind":"audio","remote_rtcp":"x"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/multicast-links", "application/json", `{"group":"10.0.0.1:5000","kind":"audio"}`, 400, "invalid_request"},
		{"POST", "/api/v1/sessions/" + sid + "/multicast-links", "application/json", `{"group":"239.1.1.1:5000","kind":"audio","ttl":300}`, 400, "invalid_request"},
		{"DELETE", "/api/v1/sessions/" + sid + "/rtp-links/l_nope", "", "", 404, "not_found"},
		{"GET", "/api/v1/nothing-here", "", "", 404, "not_found"},
	}
	for _, c := range cases {
		code, out := do(t, srv, c.method, c.path, c.ct, c.body)
		if code != c.status || errCode(out) != c.code {
			t.Errorf("%s %s %.60q: got %d %v, want %d %s", c.method, c.path, c.body, code, out, c.status, c.code)
		}
		if msg, _ := out["error"].(map[string]any)["message"].(string); msg == "" {
			t.Errorf("%s %s: error without a message", c.method, c.path)
		}
	}
	// None of the refused requests left anything behind.
	if ss, _ := cat.ListSessions(context.Background()); len(ss) != 1 {
		t.Errorf("%d sessions in the catalog, want 1", len(ss))
	}
	if ls, _ := cat.ListLinks(context.Background(), sid); len(ls) != 0 {
		t.Errorf("%d links in the catalog, want 0", len(ls))
	}
}

func TestLinkConflictsAndLifecycle(t *testing.T) {
	srv, cat := newTestServer(t)
	_, s := do(t, srv, "POST", "/api/v1/sessions", "", ``) // empty body is {}
	sid := s["id"].(string)
	body := `{"remote":"127.0.0.1:47000","kind":"audio"}`
	code, l := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "application/json", body)
	if code != 201 {
		t.Fatalf("add link: %d %v", code, l)
	}
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "application/json", body); code != 409 || errCode(out) != "conflict" {
		t.Fatalf("same remote twice: %d %v", code, out)
	}
	if ls, _ := cat.ListLinks(context.Background(), sid); len(ls) != 1 {
		t.Fatalf("%d links stored after conflict, want 1", len(ls))
	}
	lid := l["id"].(string)
	if code, _ := do(t, srv, "DELETE", "/api/v1/sessions/"+sid+"/multicast-links/"+lid, "", ""); code != 404 {
		t.Errorf("removing an RTP link as multicast: %d", code)
	}
	if code, _ := do(t, srv, "DELETE", "/api/v1/sessions/"+sid+"/rtp-links/"+lid, "", ""); code != 204 {
		t.Errorf("remove link: %d", code)
	}
	// The address is free again.
	if code, _ := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "application/json", body); code != 201 {
		t.Errorf("re-add after remove: %d", code)
	}
	if code, out := do(t, srv, "DELETE", "/api/v1/sessions/"+sid, "", ""); code != 200 || out["state"] != "finished" {
		t.Fatalf("end: %d %v", code, out)
	}
	if code, out := do(t, srv, "DELETE", "/api/v1/sessions/"+sid, "", ""); code != 409 {
		t.Errorf("end twice: %d %v", code, out)
	}
	if code, _ := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "application/json", body); code != 409 {
		t.Errorf("link on finished session: %d", code)
	}
	code, list := do(t, srv, "GET", "/api/v1/sessions", "", "")
	if code != 200 || len(list["sessions"].([]any)) != 1 {
		t.Errorf("list: %d %v", code, list)
	}
}

// Every route the server registers is in the OpenAPI document and vice versa.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	srv, _ := newTestServer(t)
	code, doc := do(t, srv, "GET", "/api/v1/openapi.json", "", "")
	if code != 200 || doc["openapi"] != "3.0.3" {
		t.Fatalf("openapi: %d", code)
	}
	documented := map[string]bool{}
	for path, ops := range doc["paths"].(map[string]any) {
		for method := range ops.(map[string]any) {
			if method != "parameters" {
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	srcBytes, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(srcBytes)
	re := regexp.MustCompile(`"(GET|POST|DELETE|PUT|PATCH) (/[^"]*)"`)
	routes := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		if strings.HasPrefix(m[2], "/debug/") {
			continue // Go's profiler, off unless http.pprof is set; not part of the API
		}
		routes[m[1]+" "+m[2]] = true
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for d := range documented {
		if !routes[d] {
			t.Errorf("openapi.json documents %s, which the server lacks", d)
		}
	}
}
