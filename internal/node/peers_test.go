package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestPeerDelayAcrossCluster: two nodes on three routed nats-servers and
// PostgreSQL each measure their round trip to the other over NATS: each
// one's heartbeat, as GET /api/v1/nodes of the other node shows it, lists
// the other with an RTT above 0 and no probe lost at the end, and each
// node's /metrics has the series for its peer.
func TestPeerDelayAcrossCluster(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	type peer struct {
		Node       string  `json:"node"`
		RTTSeconds float64 `json:"rtt_seconds"`
		Loss       float64 `json:"loss"`
	}
	var got struct {
		Nodes []struct {
			ID        string `json:"id"`
			Heartbeat struct {
				Peers []peer `json:"peers"`
			} `json:"heartbeat"`
		}
	}
	// in is node id's heartbeat's entry for peer, as n lists it.
	in := func(n *Node, id, other string) (peer, bool) {
		if code := call(t, "GET", n.URL()+"/api/v1/nodes", nil, &got); code != 200 {
			t.Fatalf("GET /api/v1/nodes = %d", code)
		}
		for _, e := range got.Nodes {
			if e.ID != id {
				continue
			}
			for _, p := range e.Heartbeat.Peers {
				if p.Node == other {
					return p, true
				}
			}
		}
		return peer{}, false
	}
	for _, x := range []struct {
		via       *Node
		id, other string
	}{{b, "node-a", "node-b"}, {a, "node-b", "node-a"}} {
		testutil.WaitUntil(t, 30*time.Second, func() string {
			// The first probes may find no route to the other's
			// subject yet; loss 0 once 16 later ones were answered.
			if p, ok := in(x.via, x.id, x.other); !ok || p.RTTSeconds <= 0 || p.Loss != 0 {
				return fmt.Sprintf("%s's heartbeat has %s at %+v (listed %v)", x.id, x.other, p, ok)
			}
			return ""
		})
	}
	if v := metricValue(t, a, `convene_cluster_peer_rtt_seconds{peer="node-b"}`); v <= 0 {
		t.Errorf(`node-a's convene_cluster_peer_rtt_seconds{peer="node-b"} = %v, want > 0`, v)
	}
	if v := metricValue(t, b, `convene_cluster_peer_probes_total{result="reply"}`); v <= 0 {
		t.Errorf(`node-b's probes answered: %v, want > 0`, v)
	}
}
