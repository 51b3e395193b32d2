package node

import (
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// A session's event stream on one node carries the changes made through
// the others (member joins, floor changes), each once, with the node it
// happened on; this node's own come without one.
func TestEventsAcrossNodes(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	s := createSession(t, a, "events span nodes")
	_, tok := joinAs(t, b, s.ID, "Bea", "participant")
	w := dialWS(t, b, s.ID, tok)
	joinedAs := func(id string) func(map[string]any) bool {
		return func(f map[string]any) bool {
			d, _ := f["data"].(map[string]any)
			return f["type"] == "member.joined" && d != nil && d["id"] == id
		}
	}
	within := func(d time.Duration, match func(map[string]any) bool) map[string]any { return w.within(t, d, match) }

	// B's interest in A's events crosses the routes in a moment: members
	// join through A until one's event reaches B's stream.
	var f map[string]any
	testutil.WaitUntil(t, 30*time.Second, func() string {
		id, _ := joinAs(t, a, s.ID, "Al", "participant")
		if f = within(time.Second, joinedAs(id)); f == nil {
			return "no member.joined made on node A in node B's stream"
		}
		return ""
	})
	if f["node"] != "node-a" {
		t.Errorf("an event made on A says node %v", f["node"])
	}

	// A floor change made through A (the owner) reaches B's stream too.
	if code := call(t, "PUT", a.URL()+"/api/v1/sessions/"+s.ID+"/floors/audio", map[string]any{"style": "floor_control"}, nil); code != 200 {
		t.Fatalf("floor style through A: %d", code)
	}
	if within(10*time.Second, func(f map[string]any) bool { return f["type"] == "floor.style" && f["node"] == "node-a" }) == nil {
		t.Error("no floor.style from A in B's stream")
	}

	// B's own event: once, without a node.
	id, _ := joinAs(t, b, s.ID, "Bo", "participant")
	if f = within(10*time.Second, joinedAs(id)); f == nil || f["node"] != nil {
		t.Fatalf("B's own member.joined: %v", f)
	}
	if f = within(time.Second, joinedAs(id)); f != nil {
		t.Errorf("B's own event came twice: %v", f)
	}
}
