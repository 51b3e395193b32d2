//go:build linux

package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestRefusalPrefersNearerNode: node A embeds NATS and delivers at most
// 100 packets/s; node B (ten million) reaches A's NATS through a link that
// holds each direction's bytes 10 ms (startDelayLink), node C (20,000)
// directly. A measures B's round trip above C's, so a refusal on full A
// names C first although B has more room; by room alone it would be B.
func TestRefusalPrefersNearerNode(t *testing.T) {
	cfgA := testConfig(t, t.TempDir())
	cfgA.NodeID, cfgA.NATS.Listen = "node-a", "127.0.0.1:0"
	cfgA.Capacity.PPS, cfgA.Capacity.Headroom = 100, 0
	a := startNode(t, cfgA)
	natsAddr := strings.TrimPrefix(a.Bus().ClientURL(), "nats://")
	cfgB := testConfig(t, t.TempDir())
	cfgB.NodeID, cfgB.NATS.URL = "node-b", "nats://"+startDelayLink(t, natsAddr, 10*time.Millisecond, 10*time.Millisecond, 0)
	startNode(t, cfgB)
	cfgC := testConfig(t, t.TempDir())
	cfgC.NodeID, cfgC.NATS.URL, cfgC.Capacity.PPS = "node-c", a.Bus().ClientURL(), 20_000
	startNode(t, cfgC)

	testutil.WaitUntil(t, 30*time.Second, func() string {
		got := a.alternatives(50)
		if len(got) != 2 || got[0].Node != "node-c" || got[1].Node != "node-b" || got[1].RoomPPS <= got[0].RoomPPS {
			return fmt.Sprintf("alternatives %+v (A's delays %+v), want node-c then node-b with more room", got, a.peers.Peers())
		}
		return ""
	})
	t.Logf("node A's delays: %+v", a.peers.Peers())

	s := createSession(t, a, "full on A")
	addLink(t, a, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "sendonly"})
	for range 2 { // 2 × 50 packets/s: A is full
		addLink(t, a, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
	}
	r := postLink(t, a, s.ID)
	if r.Status != 503 || len(r.Alts) != 2 || r.Alts[0].Node != "node-c" || r.Alts[1].Node != "node-b" {
		t.Errorf("a link on full node A: %+v, want 503 naming node-c, then node-b", r)
	}
}
