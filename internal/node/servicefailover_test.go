package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/testutil"
)

// fetch is an HTTP GET that reports failure instead of failing the test
// (for polling goroutines): the status (0 if the request failed), the
// Location header and the body.
func fetch(c *http.Client, url string) (int, string, []byte) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), b
}

// hlsSegments opens a session's stream on node url as a viewer with
// token and reads its video's media playlist: how many whole segments it
// lists (-1 if it could not be read).
func hlsSegments(url, sid, token string) int {
	code, loc, _ := fetch(noRedirect, url+"/hls/"+sid+"/index.m3u8?token="+token)
	if code != http.StatusFound {
		return -1
	}
	code, _, b := fetch(http.DefaultClient, url+strings.TrimSuffix(loc, "index.m3u8")+"video1_stream.m3u8")
	if code != http.StatusOK {
		return -1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// compositeFrames is how many frames composite id of a session has made
// on node url (-1 if it does not run there).
func compositeFrames(url, sid, id string) (compositeJSON, int) {
	req, _ := http.NewRequest("GET", url+"/api/v1/sessions/"+sid+"/composites", nil)
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return compositeJSON{}, -1
	}
	defer resp.Body.Close()
	var l struct{ Composites []compositeJSON }
	if json.NewDecoder(resp.Body).Decode(&l) != nil {
		return compositeJSON{}, -1
	}
	for _, c := range l.Composites {
		if c.ID == id {
			return c, int(c.Frames)
		}
	}
	return compositeJSON{}, -1
}

// firstAfter polls cond every 100 ms until it holds or d has passed since
// from, and sends how long after from it first held (or -1).
func firstAfter(from time.Time, d time.Duration, cond func() bool) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		for time.Since(from) < d {
			if cond() {
				out <- time.Since(from)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		out <- -1
	}()
	return out
}

// nextEvent waits up to d for an event on sub and returns its data.
func nextEvent(t *testing.T, sub *nats.Subscription, d time.Duration) map[string]any {
	t.Helper()
	m, err := sub.NextMsg(d)
	if err != nil {
		t.Errorf("no %s: %v", sub.Subject, err)
		return nil
	}
	var ev struct{ Data map[string]any }
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Data == nil {
		t.Errorf("%s: %s", sub.Subject, m.Data)
	}
	return ev.Data
}

// TestHLSAndCompositeComeBackAfterKill9: three nats-servers, PostgreSQL,
// node A — a child process — owning a session, node B, through which
// ffmpeg sends a camera and a tone, and node C. The operator starts,
// through A, an HLS stream and a composite of the session: both run on
// A. A is killed with SIGKILL. The survivor that takes the session over
// once A's lease has expired (B or C) starts both again: the composite
// with its ID and request (a new member publishes it; A's leaves the
// session), the stream under the same paths, so the viewer token handed
// out on A opens it there — and through the other survivor, which passes
// the viewer's requests on. It announces hls.moved and composite.moved.
// The time from the kill to the composite's first frame and to the
// first playlist with a segment served is logged; each must come within
// 10 s of the takeover's earliest moment (the lease's TTL and one
// renewal round).
func TestHLSAndCompositeComeBackAfterKill9(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	c, a := startClusterWithChild(t, "node-a", "node-b", "node-c")
	b, cn := c.nodes[0], c.nodes[1]
	s := createSession(t, a, "media services failover")
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(c.logs.String(), "\n") {
				if strings.Contains(l, "component=failover") || strings.Contains(l, "media service") {
					t.Log(l)
				}
			}
		}
	})
	sendFFmpeg(t, b, s.ID, 3*time.Minute)

	var comp compositeJSON
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/composites",
		map[string]any{"layout": "grid2", "width": 320, "height": 180, "fps": 10}, &comp); code != 201 {
		t.Fatalf("start a composite on node A: %d", code)
	}
	var stream struct {
		Playlist string `json:"playlist"`
	}
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/hls", map[string]any{}, &stream); code != 201 {
		t.Fatalf("start HLS on node A: %d", code)
	}
	var jt struct{ Token string }
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/tokens", map[string]string{"role": "listener"}, &jt); code != 201 {
		t.Fatalf("a viewer token from node A: %d", code)
	}
	viewer := jt.Token
	testutil.WaitUntil(t, 60*time.Second, func() string {
		_, f := compositeFrames(a.URL(), s.ID, comp.ID)
		n := hlsSegments(a.URL(), s.ID, viewer)
		if f <= 0 || n < 1 {
			return fmt.Sprintf("on node A: the composite made %d frames, the stream lists %d segments", f, n)
		}
		return ""
	})
	subscribe := func(name string) *nats.Subscription {
		sub, err := b.Bus().Conn().SubscribeSync("convene.session." + s.ID + "." + name)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	hlsMoved, compMoved := subscribe("hls.moved"), subscribe("composite.moved")

	a.kill9()
	killed := time.Now()
	const within = 10 * time.Second
	able := session.DefaultLeaseTTL + session.DefaultLeaseRenew // A's lease expires, B's next round
	frame := firstAfter(killed, able+60*time.Second, func() bool {
		_, fb := compositeFrames(b.URL(), s.ID, comp.ID)
		_, fc := compositeFrames(cn.URL(), s.ID, comp.ID)
		return fb > 0 || fc > 0
	})
	playlist := firstAfter(killed, able+60*time.Second, func() bool { return hlsSegments(b.URL(), s.ID, viewer) >= 1 })
	var owned time.Duration
	var survivor, other *Node
	testutil.WaitUntil(t, able+30*time.Second, func() string {
		var view sessionJSON
		call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &view)
		switch view.Owner {
		case "node-b":
			survivor, other = b, cn
		case "node-c":
			survivor, other = cn, b
		default:
			return "the session is owned by " + view.Owner
		}
		owned = time.Since(killed)
		return ""
	})
	tFrame, tPlaylist := <-frame, <-playlist
	if tFrame < 0 || tPlaylist < 0 {
		t.Fatalf("node B did not bring back the composite (%v) or the stream (%v) within %v of the kill", tFrame >= 0,
			tPlaylist >= 0, able+60*time.Second)
	}
	t.Logf("after the kill: %s owned the session at %v (seen polling; lease TTL %v, renewed every %v); "+
		"the composite's first frame at %v, the first playlist with a segment served (through node B) at %v",
		survivor.cfg.NodeID, owned.Round(100*time.Millisecond), session.DefaultLeaseTTL, session.DefaultLeaseRenew,
		tFrame.Round(100*time.Millisecond), tPlaylist.Round(100*time.Millisecond))
	if tFrame > able+within || tPlaylist > able+within {
		t.Errorf("the composite (%v) or the stream (%v) came back later than %v after the kill", tFrame, tPlaylist, able+within)
	}

	// The composite: same ID and request, a new member publishing it; A's
	// member left the session.
	now, _ := compositeFrames(survivor.URL(), s.ID, comp.ID)
	if now.Member == "" || now.Member == comp.Member || now.Track == comp.Track {
		t.Errorf("the composite on B: member %q track %q (on A: %q, %q)", now.Member, now.Track, comp.Member, comp.Track)
	}
	var ms struct{ Members []struct{ ID string } }
	call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &ms)
	for _, m := range ms.Members {
		if m.ID == comp.Member {
			t.Errorf("node A's composite member %s is still in the session", comp.Member)
		}
	}
	var after struct {
		Playlist string `json:"playlist"`
	}
	if code := call(t, "GET", survivor.URL()+"/api/v1/sessions/"+s.ID+"/hls", nil, &after); code != 200 || after.Playlist != stream.Playlist {
		t.Errorf("the stream on %s: %d, playlist %q (on A: %q)", survivor.cfg.NodeID, code, after.Playlist, stream.Playlist)
	}
	for _, n := range []*Node{survivor, other} {
		if k := hlsSegments(n.URL(), s.ID, viewer); k < 1 {
			t.Errorf("the viewer token opens the stream through %s: %d segments", n.cfg.NodeID, k)
		}
	}
	id := survivor.cfg.NodeID
	if d := nextEvent(t, hlsMoved, 10*time.Second); d != nil &&
		(d["node"] != id || d["from"] != "node-a" || d["playlist"] != stream.Playlist || d["node_url"] != survivor.URL()) {
		t.Errorf("hls.moved: %v", d)
	}
	if d := nextEvent(t, compMoved, 10*time.Second); d != nil &&
		(d["node"] != id || d["from"] != "node-a" || d["id"] != comp.ID || d["layout"] != "grid2" || d["width"] != 320.0) {
		t.Errorf("composite.moved: %v", d)
	}
	rows, err := b.cat.MediaServices(context.Background(), s.ID)
	if err != nil || len(rows) != 2 || rows[0].Node != id || rows[1].Node != id {
		t.Errorf("the catalog's media services: %+v %v", rows, err)
	}

	// Stopped through the survivor, both are forgotten.
	if code := call(t, "DELETE", survivor.URL()+"/api/v1/sessions/"+s.ID+"/composites/"+comp.ID, nil, nil); code != 204 {
		t.Errorf("stop the composite: %d", code)
	}
	if code := call(t, "DELETE", survivor.URL()+"/api/v1/sessions/"+s.ID+"/hls", nil, nil); code != 204 {
		t.Errorf("stop the stream: %d", code)
	}
	if rows, err := b.cat.MediaServices(context.Background(), s.ID); err != nil || len(rows) != 0 {
		t.Errorf("after the stops: %+v %v", rows, err)
	}
}

// TestMovedMediaServicesStopHere: two nodes in process; A owns a session
// and runs an HLS stream and a composite started through its API, kept in
// the catalog. When the catalog says they moved to B (as if B had taken
// A for dead while A was only cut off), A stops both at its next round,
// without announcing hls.stopped. A composite and a stream started again
// on A are kept again, and the session's end forgets them.
func TestMovedMediaServicesStopHere(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	c := startCluster(t, "node-a", "node-b")
	a := c.nodes[0]
	s := createSession(t, a, "moved on")
	start := func() compositeJSON {
		t.Helper()
		var comp compositeJSON
		if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/composites",
			map[string]any{"width": 160, "height": 90, "fps": 5}, &comp); code != 201 {
			t.Fatalf("start a composite: %d", code)
		}
		if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/hls", map[string]any{}, nil); code != 201 {
			t.Fatalf("start HLS: %d", code)
		}
		return comp
	}
	comp := start()
	ctx := context.Background()
	rows, err := a.cat.MediaServices(ctx, s.ID)
	if err != nil || len(rows) != 2 || rows[0].Kind != catalog.ServiceComposite || rows[0].ID != comp.ID ||
		rows[0].Node != "node-a" || rows[0].StartedBy != "operator" || rows[0].Member != comp.Member ||
		!strings.Contains(rows[0].Request, `"width":160`) || rows[1].Kind != catalog.ServiceHLS || rows[1].ID != s.ID {
		t.Fatalf("kept: %+v %v", rows, err)
	}
	stopped, err := a.Bus().Conn().SubscribeSync("convene.session." + s.ID + ".hls.stopped")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := a.sessions.Lease(s.ID)
	if !ok {
		t.Fatal("node A does not own the session")
	}
	for _, m := range rows {
		if err := a.cat.MoveMediaService(ctx, l, time.Now(), m, "node-b", ""); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitUntil(t, 3*session.DefaultLeaseRenew, func() string {
		if _, ok := a.hls.Get(s.ID); ok || len(a.composites.IDs()) != 0 {
			return fmt.Sprintf("node A still runs the stream (%v) or composites %v", ok, a.composites.IDs())
		}
		return ""
	})
	if m, err := stopped.NextMsg(time.Second); err == nil {
		t.Errorf("node A announced hls.stopped for a stream that moved on: %s", m.Data)
	}
	if rows, _ := a.cat.MediaServices(ctx, s.ID); len(rows) != 2 || rows[0].Node != "node-b" || rows[1].Node != "node-b" {
		t.Errorf("node A changed the moved rows: %+v", rows)
	}

	start()
	if rows, _ := a.cat.MediaServices(ctx, s.ID); len(rows) != 3 {
		t.Fatalf("started again: %+v", rows)
	}
	if code := call(t, "DELETE", a.URL()+"/api/v1/sessions/"+s.ID, nil, nil); code != 200 {
		t.Fatalf("end the session: %d", code)
	}
	if rows, _ := a.cat.MediaServices(ctx, s.ID); len(rows) != 0 {
		t.Errorf("after the session's end: %+v", rows)
	}
}
