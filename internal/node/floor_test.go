package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/auth"
)

// callAs is call with a member token instead of the operator key.
func callAs(t *testing.T, tok, method, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		json.Unmarshal(data, out)
	}
	return resp.StatusCode
}

type wsClient struct {
	c      *websocket.Conn
	frames chan map[string]any
}

func dialWS(t *testing.T, n *Node, sid, tok string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(n.URL(), "http") + "/api/v1/sessions/" + sid + "/events"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{c: c, frames: make(chan map[string]any, 256)}
	go func() {
		defer close(w.frames)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var f map[string]any
			json.Unmarshal(b, &f)
			w.frames <- f
		}
	}()
	if f := w.next(t, func(f map[string]any) bool { return f["type"] == "stream.start" }); f == nil {
		t.Fatal("no stream.start")
	}
	return w
}

// next returns the first frame that match accepts, skipping others.
func (w *wsClient) next(t *testing.T, match func(map[string]any) bool) map[string]any {
	t.Helper()
	f := w.within(t, 10*time.Second, match)
	if f == nil {
		t.Fatal("no matching frame within 10 s")
	}
	return f
}

// within returns the first frame within d that match accepts, or nil.
func (w *wsClient) within(t *testing.T, d time.Duration, match func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				t.Fatal("websocket closed")
			}
			if match(f) {
				return f
			}
		case <-timeout:
			return nil
		}
	}
}

func (w *wsClient) send(t *testing.T, cmd string) {
	if err := w.c.Write(context.Background(), websocket.MessageText, []byte(cmd)); err != nil {
		t.Fatal(err)
	}
}

func rtpFrom(seq uint16, marker byte) []byte {
	return []byte{0x80, 0, byte(seq >> 8), byte(seq), 0, 0, 0, byte(seq), 0, 0, 0, marker, marker, marker}
}

// countFrom reads datagrams until want of them carry marker (or 10 s
// pass), and returns how many carried each marker.
func countFrom(t *testing.T, c *net.UDPConn, marker byte, want int) map[byte]int {
	t.Helper()
	got := map[byte]int{}
	buf := make([]byte, 2048)
	deadline := time.Now().Add(10 * time.Second)
	for got[marker] < want && time.Now().Before(deadline) {
		c.SetReadDeadline(deadline)
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		if n >= 12 {
			got[buf[11]]++
		}
	}
	return got
}

// Two WebSocket clients race for the audio floor. Real RTP through the
// node's shared UDP socket: the loser's media does not reach a plain RTP
// receiver and is counted as a floor drop; after the winner releases, the
// loser is granted the floor and is heard.
func TestFloorRaceOverWebSocketAndRTP(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "floor")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	if code := call(t, "PUT", base+"/floors/audio", map[string]any{"style": "floor_control", "auto": true}, nil); code != 200 {
		t.Fatalf("style: %d", code)
	}
	recv := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": recv.LocalAddr().String(), "kind": "audio", "direction": "recvonly"})

	type party struct {
		id, tok string
		conn    *net.UDPConn
		ws      *wsClient
		link    string
		marker  byte
	}
	var ps [2]*party
	for i := range ps {
		id, tok := joinMember(t, n, s.ID, "p")
		p := &party{id: id, tok: tok, conn: udpConn(t), marker: byte(0xA0 + i)}
		var l linkJSON
		if code := callAs(t, p.tok, "POST", base+"/rtp-links", map[string]any{"remote": p.conn.LocalAddr().String(),
			"kind": "audio", "direction": "sendonly", "member": p.id}, &l); code != 201 {
			t.Fatalf("member link: %d", code)
		}
		p.link = l.ID
		p.ws = dialWS(t, n, s.ID, p.tok)
		ps[i] = p
	}
	// The race: both ask at once.
	for i, p := range ps {
		go p.ws.c.Write(context.Background(), websocket.MessageText, []byte(`{"id":"race`+string(rune('0'+i))+`","op":"request","floor":"audio"}`))
	}
	status := map[string]string{}
	for _, p := range ps {
		f := p.ws.next(t, func(f map[string]any) bool { return f["type"] == "reply" })
		if f["ok"] != true {
			t.Fatalf("request reply %v", f)
		}
		status[p.id] = f["result"].(map[string]any)["status"].(string)
	}
	var winner, loser *party
	for _, p := range ps {
		switch status[p.id] {
		case "Granted":
			winner = p
		case "Accepted":
			loser = p
		}
	}
	if winner == nil || loser == nil {
		t.Fatalf("statuses %v: want one Granted and one Accepted", status)
	}
	rtpAddr, _ := net.ResolveUDPAddr("udp", n.RTPAddr())
	send := func(p *party, from, count int) {
		for i := 0; i < count; i++ {
			if _, err := p.conn.WriteToUDP(rtpFrom(uint16(from+i), p.marker), rtpAddr); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The loser speaks first, then the winner: the receiver hears only the winner.
	send(loser, 0, 20)
	send(winner, 0, 20)
	got := countFrom(t, recv, winner.marker, 20)
	if got[winner.marker] != 20 || got[loser.marker] != 0 {
		t.Fatalf("while %s holds the floor the receiver got %v", winner.id, got)
	}
	var sess sessionJSON
	deadline := time.Now().Add(10 * time.Second)
	for {
		call(t, "GET", base, nil, &sess)
		drops := uint64(0)
		for _, l := range sess.Links {
			if l.ID == loser.link {
				drops = l.Stats.Dropped["floor"]
			}
		}
		if drops == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loser's floor drops %d, want 20", drops)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The winner releases; the loser is granted and heard.
	winner.ws.send(t, `{"id":"rel","op":"release","floor":"audio"}`)
	loser.ws.next(t, func(f map[string]any) bool {
		d, _ := f["data"].(map[string]any)
		return f["type"] == "floor.request" && d["member"] == loser.id && d["status"] == "Granted"
	})
	send(loser, 100, 20)
	if got := countFrom(t, recv, loser.marker, 20); got[loser.marker] != 20 {
		t.Fatalf("after release the receiver got %v", got)
	}
}

// A node without a configured key makes one, shows it once, keeps only its
// digest in the data dir and accepts the same key after a restart; the
// data dir and the catalog's files are the node's user's alone.
func TestGeneratedAPIKey(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Catalog.DSN = filepath.Join(cfg.DataDir, "convene.db")
	cfg.Auth.APIKeys = ""
	n := startNode(t, cfg)
	key := n.GeneratedAPIKey()
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, APIKeyHashFile))
	if key == "" || err != nil || strings.TrimSpace(string(b)) != auth.HashKey(key) {
		t.Fatalf("key %q digest file %q %v", key, b, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "api_key")); err == nil {
		t.Error("the key is kept in clear in the data dir")
	}
	req, _ := http.NewRequest("POST", n.URL()+"/api/v1/sessions", strings.NewReader(`{}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no key: %v %v", resp, err)
	}
	if code := callAs(t, key, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "k"}, nil); code != 201 {
		t.Fatalf("generated key refused: %d", code)
	}
	for _, name := range []string{APIKeyHashFile, tokenSecretFile, "convene.db", "convene.db-wal", "convene.db-shm"} {
		fi, err := os.Stat(filepath.Join(cfg.DataDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(cfg.DataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}
	n.Drain(context.Background())
	n2 := startNode(t, cfg)
	if k := n2.GeneratedAPIKey(); k != "" {
		t.Fatalf("the key was shown again after a restart: %q", k)
	}
	if code := callAs(t, key, "POST", n2.URL()+"/api/v1/sessions", map[string]string{"name": "k2"}, nil); code != 201 {
		t.Fatalf("the key was refused after a restart: %d", code)
	}
}

// A data dir from before keeps its clear-text api_key: the node moves it
// to a digest (the same key keeps working) and removes the file.
func TestLegacyAPIKeyFileIsHashed(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Auth.APIKeys = ""
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "api_key"), []byte("old-key-0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cfg)
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "api_key")); err == nil {
		t.Error("the clear-text key file is still there")
	}
	if code := callAs(t, "old-key-0123", "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": "k"}, nil); code != 201 {
		t.Fatalf("the old key was refused: %d", code)
	}
}

// The WebSocket stream and NATS carry the same events with the same
// sequence numbers, in the same order.
func TestEventsOnNATSAndWebSocketAgree(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "agree")
	msgs := make(chan *nats.Msg, 64)
	sub, err := n.Bus().Conn().ChanSubscribe("convene.session."+s.ID+".>", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	n.Bus().Conn().Flush()
	ws := dialWS(t, n, s.ID, testAPIKey)
	base := n.URL() + "/api/v1/sessions/" + s.ID
	call(t, "POST", base+"/members", map[string]string{"name": "a", "role": "chair"}, nil)
	call(t, "PUT", base+"/floors/video", map[string]any{"style": "brainstorming"}, nil)
	call(t, "POST", base+"/state", map[string]string{"action": "deactivate"}, nil)
	var fromWS []string
	for len(fromWS) < 4 {
		f := ws.next(t, func(map[string]any) bool { return true })
		fromWS = append(fromWS, f["type"].(string)+"#"+itoa(f["seq"]))
	}
	var fromNATS []string
	for len(fromNATS) < 4 {
		select {
		case m := <-msgs:
			var ev struct {
				Type string
				Seq  float64
			}
			json.Unmarshal(m.Data, &ev)
			if !strings.HasSuffix(m.Subject, "."+ev.Type) {
				t.Fatalf("subject %s carries %s", m.Subject, ev.Type)
			}
			fromNATS = append(fromNATS, ev.Type+"#"+itoa(ev.Seq))
		case <-time.After(5 * time.Second):
			t.Fatalf("NATS got %v, WebSocket %v", fromNATS, fromWS)
		}
	}
	// The chair gets a brainstorming replica: one request, created Granted.
	want := []string{"member.joined", "floor.style", "floor.request", "deactivated"}
	for i := range want {
		if fromWS[i] != fromNATS[i] || !strings.HasPrefix(fromWS[i], want[i]+"#") {
			t.Fatalf("WebSocket %v\nNATS      %v\nwant types %v", fromWS, fromNATS, want)
		}
	}
}

func itoa(v any) string { b, _ := json.Marshal(v); return string(b) }
