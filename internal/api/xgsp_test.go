package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// doAs is do with a given credential ("" for none) instead of the key.
func doAs(t *testing.T, srv *httptest.Server, cred, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
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

// joinAs issues a join token for role and joins with it; it returns the
// member ID and its member token.
func joinAs(t *testing.T, srv *httptest.Server, sid, role, name string) (string, string) {
	t.Helper()
	code, tok := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/tokens", "", `{"role":"`+role+`"}`)
	if code != 201 {
		t.Fatalf("token: %d %v", code, tok)
	}
	code, out := doAs(t, srv, tok["token"].(string), "POST", "/api/v1/sessions/"+sid+"/members", `{"name":"`+name+`"}`)
	if code != 201 {
		t.Fatalf("join: %d %v", code, out)
	}
	m := out["member"].(map[string]any)
	if m["role"] != role {
		t.Fatalf("joined as %v, want %s", m["role"], role)
	}
	return m["id"].(string), out["token"].(map[string]any)["token"].(string)
}

func TestAccess(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, cred := range []string{"", "wrong-key", "cv1.bogus.sig"} {
		if code, out := doAs(t, srv, cred, "POST", "/api/v1/sessions", `{"name":"x"}`); code != 401 || errCode(out) != "unauthorized" {
			t.Errorf("create with %q: %d %v", cred, code, out)
		}
	}
	_, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"a"}`)
	sid := s["id"].(string)
	_, s2 := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"b"}`)
	_, tok := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/tokens", "", `{"role":"participant"}`)
	join := tok["token"].(string)
	if code, _ := doAs(t, srv, join, "POST", "/api/v1/sessions/"+s2["id"].(string)+"/members", `{}`); code != 401 {
		t.Errorf("join token used on another session: %d", code)
	}
	if code, _ := doAs(t, srv, join, "POST", "/api/v1/sessions/"+sid+"/members", `{"role":"chair"}`); code != 403 {
		t.Errorf("join token asking for a higher role: %d", code)
	}
	if code, _ := doAs(t, srv, join, "DELETE", "/api/v1/sessions/"+sid, ""); code != 401 {
		t.Errorf("join token ends a session: %d", code)
	}
	mid, mtok := joinAs(t, srv, sid, "participant", "p")
	if code, _ := doAs(t, srv, mtok, "DELETE", "/api/v1/sessions/"+sid, ""); code != 403 {
		t.Errorf("member ends a session: %d", code)
	}
	if code, _ := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/members", `{}`); code != 409 {
		t.Errorf("member token joins again: %d", code)
	}
	if code, _ := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", `{"remote":"127.0.0.1:47100","kind":"audio","member":"m_other"}`); code != 403 {
		t.Errorf("member adds a link for another: %d", code)
	}
	if code, _ := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", `{"remote":"127.0.0.1:47100","kind":"audio","member":"`+mid+`"}`); code != 400 {
		t.Errorf("member adds a loopback link without links.allow_destinations: %d", code)
	}
	if code, l := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", `{"remote":"198.51.100.10:47100","kind":"audio","member":"`+mid+`"}`); code != 201 || l["member"] != mid {
		t.Errorf("member adds its own link: %d %v", code, l)
	}
	if code, _ := doAs(t, srv, mtok, "PUT", "/api/v1/sessions/"+sid+"/floors/audio", `{"style":"floor_control"}`); code != 403 {
		t.Errorf("participant sets the floor style: %d", code)
	}
	for _, body := range []string{`{"role":"king"}`, `{"role":"chair","ttl_seconds":-1}`, `{"role":"chair","ttl_seconds":99999999}`} {
		if code, _ := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/tokens", "", body); code != 400 {
			t.Errorf("token %s: %d", body, code)
		}
	}
	if code, _ := doAs(t, srv, mtok, "DELETE", "/api/v1/sessions/"+sid+"/members/"+mid, ""); code != 204 {
		t.Errorf("member leaves: %d", code)
	}
	if code, _ := doAs(t, srv, mtok, "GET", "/api/v1/sessions/"+sid+"/events", ""); code != 401 {
		t.Errorf("token of a member that left: %d", code)
	}
}

func TestStateMembersSubgroupsFloorsREST(t *testing.T) {
	srv, _ := newTestServer(t)
	start := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"later","start_at":"`+start+`"}`)
	if code != 201 || s["state"] != "created" || s["start_at"] == nil {
		t.Fatalf("scheduled: %d %v", code, s)
	}
	sid := s["id"].(string)
	code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/state", "", `{"action":"deactivate"}`)
	if code != 409 || out["state"] != "created" || errCode(out) != "conflict" {
		t.Fatalf("illegal transition: %d %v", code, out)
	}
	if code, _ := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/state", "", `{"action":"nap"}`); code != 400 {
		t.Fatalf("unknown action: %d", code)
	}
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/state", "", `{"action":"activate"}`); code != 200 || out["state"] != "activated" {
		t.Fatalf("activate: %d %v", code, out)
	}
	chair, ctok := joinAs(t, srv, sid, "chair", "c")
	a, atok := joinAs(t, srv, sid, "participant", "a")
	_, ltok := joinAs(t, srv, sid, "listener", "l")
	if code, out := do(t, srv, "GET", "/api/v1/sessions/"+sid+"/members", "", ""); code != 200 || len(out["members"].([]any)) != 3 {
		t.Fatalf("members: %d %v", code, out)
	}
	code, g := doAs(t, srv, ctok, "POST", "/api/v1/sessions/"+sid+"/subgroups", `{"name":"side","members":["`+a+`"]}`)
	if code != 201 || len(g["members"].([]any)) != 1 || g["created_by"] != chair {
		t.Fatalf("subgroup: %d %v", code, g)
	}
	if code, m := do(t, srv, "PUT", "/api/v1/sessions/"+sid+"/members/"+a+"/subgroup", "", `{"subgroup":""}`); code != 200 || m["subgroup"] != nil {
		t.Fatalf("move back: %d %v", code, m)
	}
	if code, _ := doAs(t, srv, ctok, "DELETE", "/api/v1/sessions/"+sid+"/subgroups/"+g["id"].(string), ""); code != 204 {
		t.Fatalf("delete subgroup: %d", code)
	}
	// Floors over REST.
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/request", ""); code != 409 {
		t.Fatalf("request with floor control off: %d", code)
	}
	if code, f := doAs(t, srv, ctok, "PUT", "/api/v1/sessions/"+sid+"/floors/audio", `{"style":"floor_control","auto":true}`); code != 200 || f["style"] != "floor_control" {
		t.Fatalf("style: %d %v", code, f)
	}
	if code, _ := doAs(t, srv, ctok, "PUT", "/api/v1/sessions/"+sid+"/floors/audio", `{"style":"chaos"}`); code != 400 {
		t.Fatalf("bad style: %d", code)
	}
	if code, r := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/request", ""); code != 200 || r["status"] != "Granted" {
		t.Fatalf("request: %d %v", code, r)
	}
	if code, r := doAs(t, srv, ltok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/request", ""); code != 200 || r["status"] != "Denied" {
		t.Fatalf("listener request: %d %v", code, r)
	}
	code, r := doAs(t, srv, ctok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/request", "")
	if code != 200 || r["status"] != "Accepted" || r["position"] != float64(1) {
		t.Fatalf("queued: %d %v", code, r)
	}
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/grant", `{"request_id":"`+r["id"].(string)+`"}`); code != 403 {
		t.Fatalf("participant grants: %d", code)
	}
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/replicate", `{"to":"`+chair+`"}`); code != 409 {
		t.Fatalf("replicate under floor control: %d", code)
	}
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/explode", ""); code != 404 {
		t.Fatalf("unknown primitive: %d", code)
	}
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/smell/request", ""); code != 404 {
		t.Fatalf("unknown floor: %d", code)
	}
	if code, _ := doAs(t, srv, atok, "POST", "/api/v1/sessions/"+sid+"/floors/audio/release", ""); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if code, f := do(t, srv, "GET", "/api/v1/sessions/"+sid+"/floors/audio", "", ""); code != 200 || f["tokens"].([]any)[0].(map[string]any)["holder"] != chair {
		t.Fatalf("after release the chair holds: %d %v", code, f)
	}
	if code, s := do(t, srv, "GET", "/api/v1/sessions/"+sid, "", ""); code != 200 || s["members"] != float64(3) || len(s["floors"].([]any)) != 3 {
		t.Fatalf("session view: %d %v", code, s)
	}
	if code, out := do(t, srv, "DELETE", "/api/v1/sessions/"+sid, "", ""); code != 200 || out["state"] != "finished" {
		t.Fatalf("end: %d %v", code, out)
	}
	if code, out := do(t, srv, "GET", "/api/v1/sessions/"+sid+"/members", "", ""); code != 409 || out["state"] != "finished" {
		t.Fatalf("members of a finished session: %d %v", code, out)
	}
}

type wsFrame struct {
	Type string          `json:"type"`
	Seq  uint64          `json:"seq"`
	ID   string          `json:"id"`
	OK   bool            `json:"ok"`
	Last uint64          `json:"last_seq"`
	Gap  bool            `json:"gap"`
	Data json.RawMessage `json:"data"`
}

func dialEvents(t *testing.T, srv *httptest.Server, sid, cred, query string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/sessions/" + sid + "/events" + query
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func readFrame(t *testing.T, c *websocket.Conn) wsFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f wsFrame
	json.Unmarshal(b, &f)
	return f
}

// Events arrive in order with consecutive numbers; a client that
// reconnects with after=<last seen> gets exactly the ones it missed.
func TestEventStreamResume(t *testing.T) {
	srv, _ := newTestServer(t)
	_, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"ev"}`)
	sid := s["id"].(string)
	c := dialEvents(t, srv, sid, testKey, "?after=0")
	start := readFrame(t, c)
	if start.Type != "stream.start" || start.Gap {
		t.Fatalf("start %+v", start)
	}
	first := readFrame(t, c)
	second := readFrame(t, c)
	if first.Type != "created" || second.Type != "activated" || second.Seq != first.Seq+1 || start.Last != second.Seq {
		t.Fatalf("backlog %+v %+v (start %+v)", first, second, start)
	}
	joinAs(t, srv, sid, "participant", "p1")
	j := readFrame(t, c)
	if j.Type != "member.joined" || j.Seq != second.Seq+1 {
		t.Fatalf("live %+v", j)
	}
	c.Close(websocket.StatusNormalClosure, "")
	joinAs(t, srv, sid, "participant", "p2")
	joinAs(t, srv, sid, "listener", "p3")
	c2 := dialEvents(t, srv, sid, testKey, "?after="+itoa(j.Seq))
	if f := readFrame(t, c2); f.Type != "stream.start" || f.Gap {
		t.Fatalf("resume start %+v", f)
	}
	for want := j.Seq + 1; want <= j.Seq+2; want++ {
		if f := readFrame(t, c2); f.Seq != want || f.Type != "member.joined" {
			t.Fatalf("resume: %+v, want seq %d", f, want)
		}
	}
	// A floor primitive over the socket gets a reply and its event.
	mid, mtok := joinAs(t, srv, sid, "participant", "p4")
	_ = mid
	if f := readFrame(t, c2); f.Type != "member.joined" {
		t.Fatalf("%+v", f)
	}
	c3 := dialEvents(t, srv, sid, mtok, "")
	if f := readFrame(t, c3); f.Type != "stream.start" {
		t.Fatalf("%+v", f)
	}
	ctx := context.Background()
	c3.Write(ctx, websocket.MessageText, []byte(`{"id":"q1","op":"request","floor":"audio"}`))
	if f := readFrame(t, c3); f.Type != "reply" || f.ID != "q1" || f.OK {
		t.Fatalf("request with floor control off must fail: %+v", f)
	}
	c3.Write(ctx, websocket.MessageText, []byte(`{not json`))
	if f := readFrame(t, c3); f.Type != "reply" || f.OK {
		t.Fatalf("bad command: %+v", f)
	}
	if code, _ := doAs(t, srv, testKey, "GET", "/api/v1/sessions/"+sid+"/events?after=-3", ""); code != 400 {
		t.Fatalf("bad after: %d", code)
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
