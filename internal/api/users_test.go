package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/sipusers"
)

func TestSIPUsersREST(t *testing.T) {
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	us, err := sipusers.New(sipusers.Options{Catalog: cat, Realm: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Node: NodeInfo{ID: "n1"}, Users: us,
		Access: &Access{Keys: auth.NewKeys(testKey), Tokens: auth.NewSigner([]byte("test-secret"), nil)}}))
	t.Cleanup(srv.Close)

	code, out := do(t, srv, "POST", "/api/v1/users", "application/json", `{"username":"alice","password":"s3cret-password"}`)
	if code != 201 || out["username"] != "alice" || out["realm"] != "example.test" || out["password"] != nil {
		t.Fatalf("create: %d %v", code, out)
	}
	if code, out := do(t, srv, "POST", "/api/v1/users", "application/json", `{"username":"alice","password":"other-password"}`); code != 409 {
		t.Errorf("duplicate: %d %v", code, out)
	}
	if code, _ := do(t, srv, "POST", "/api/v1/users", "application/json", `{"username":"a b","password":"s3cret-password"}`); code != 400 {
		t.Errorf("bad name: %d", code)
	}
	if code, _ := do(t, srv, "POST", "/api/v1/users", "application/json", `{"username":"bob","password":"x"}`); code != 400 {
		t.Errorf("short password: %d", code)
	}
	code, out = do(t, srv, "GET", "/api/v1/users", "", "")
	list, _ := out["users"].([]any)
	if code != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v", code, out)
	}
	for k := range list[0].(map[string]any) {
		if strings.Contains(strings.ToLower(k), "ha1") || strings.Contains(k, "password") {
			t.Errorf("list shows %q", k)
		}
	}
	// Operators only.
	resp, err := http.Get(srv.URL + "/api/v1/users")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("without the API key: %d, want 401", resp.StatusCode)
	}
	if code, _ := do(t, srv, "DELETE", "/api/v1/users/alice", "", ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, _ := do(t, srv, "DELETE", "/api/v1/users/alice", "", ""); code != 404 {
		t.Errorf("delete again: %d", code)
	}
	u, err := cat.SIPUsers(context.Background())
	if err != nil || len(u) != 0 {
		t.Errorf("catalog after delete: %v %v", u, err)
	}
}
