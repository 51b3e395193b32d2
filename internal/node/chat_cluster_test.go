package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/testutil"
)

// TestChatOnThreeNodes: one session, two members on each of three nodes
// (three routed nats-servers, one PostgreSQL catalog), all sending chat
// lines and whiteboard strokes at once. Messages reach another node's
// members over the relay by another path than the one their causal
// predecessors took, so a receiver really waits. Every member delivers
// every other's messages once, in per-sender and Δ-causal order; when
// every message arrived within Δ of being sent (the usual case; a loaded
// machine may not manage), no exception at all, otherwise each one
// justified by a message that had not yet arrived. The catalog holds each
// message once. Halfway through, a member moves from node A to node B and
// resumes from its hello: nothing lost, nothing twice, its sequence goes
// on.
func TestChatOnThreeNodes(t *testing.T) {
	c := startCluster(t, "node-a", "node-b", "node-c")
	s := createSession(t, c.nodes[0], "three nodes chat")
	r := newChatRun(t, s.ID)
	var ms []*chatMember
	for i, n := range c.nodes {
		for j := range 2 {
			name := fmt.Sprintf("m%d%d", i, j)
			_, tok := joinMember(t, n, s.ID, name)
			ms = append(ms, r.join(name, tok, n.URL))
		}
	}
	waitRelayed(t, c, s.ID)
	r.growAll()

	var wg sync.WaitGroup
	for i, m := range ms {
		var halfway func()
		if i == 0 { // on node A: moves to node B
			halfway = func() { m.reconnect(c.nodes[1].URL) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.workload(m, 17, 40, 50*time.Millisecond, 0, halfway)
		}()
	}
	wg.Wait()
	r.settle(c.nodes[2])
	count, named, held, slowest := r.report()
	if slowest <= r.delta && (count[conversation.Expired] != 0 || count[conversation.Late] != 0 || named != 0) {
		t.Errorf("every message arrived within Δ, yet %d expired, %d late, %d named missing",
			count[conversation.Expired], count[conversation.Late], named)
	}
	if ms[0].hello.Self != ms[0].self || len(ms[0].hello.History) == 0 {
		t.Errorf("the member that moved: hello self %d (was %d), %d in history", ms[0].hello.Self, ms[0].self, len(ms[0].hello.History))
	}
	t.Logf("%d deliveries waited for a message that took another path", held)
}

// waitRelayed returns once each node's subscription to the session's
// conversation has reached every nats-server: a frame published on each
// server reaches every node (counted as a bad relayed frame, which it is).
// Until then a message one node accepts may miss another node.
func waitRelayed(t *testing.T, c *cluster, sid string) {
	t.Helper()
	subject := "convene.chat." + sid
	for _, srv := range c.nats.Servers {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			before := metricValue(t, n, `convene_chat_closed_total{reason="bad_relay"}`)
			testutil.WaitFor(t, 30*time.Second, "a probe through "+srv.Name+" to reach "+n.Bus().NodeID(), func() bool {
				nc.Publish(subject, []byte{0xff})
				nc.Flush()
				return metricValue(t, n, `convene_chat_closed_total{reason="bad_relay"}`) > before
			})
		}
		nc.Close()
	}
}
