package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

type clusterNodeJSON struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Stale      bool    `json:"stale"`
	AgeSeconds float64 `json:"age_seconds"`
	Heartbeat  struct {
		Sessions            int     `json:"sessions"`
		Links               int     `json:"links"`
		PacketsInPerSecond  float64 `json:"packets_in_per_second"`
		PacketsOutPerSecond float64 `json:"packets_out_per_second"`
		CPUCores            float64 `json:"cpu_cores"`
		CapacityPPS         float64 `json:"capacity_pps"`
		Version             string  `json:"version"`
		Peers               []struct {
			Node       string  `json:"node"`
			RTTSeconds float64 `json:"rtt_seconds"`
		} `json:"peers"`
	} `json:"heartbeat"`
}

// listNodes is GET /api/v1/nodes of n, by node ID.
func listNodes(t *testing.T, n apiNode) map[string]clusterNodeJSON {
	t.Helper()
	var got struct{ Nodes []clusterNodeJSON }
	if code := call(t, "GET", n.URL()+"/api/v1/nodes", nil, &got); code != 200 {
		t.Fatalf("GET /api/v1/nodes = %d", code)
	}
	out := map[string]clusterNodeJSON{}
	for _, e := range got.Nodes {
		out[e.ID] = e
	}
	return out
}

// TestNodeRegistry: nodes on one NATS (A embeds it and listens, B and C
// connect to it). A and B list both at GET /api/v1/nodes with their load
// and configured capacity. B is stopped: A lists it as stopped and, once
// 5 s pass without its heartbeat, as stale, in the API and in /metrics. C
// loses its NATS connection without a word, as a killed node does: A
// lists it as stale but not stopped.
func TestNodeRegistry(t *testing.T) {
	cfgA := testConfig(t, t.TempDir())
	cfgA.NodeID, cfgA.NATS.Listen, cfgA.Capacity.PPS = "node-a", "127.0.0.1:0", 20000
	a := startNode(t, cfgA)
	cfgB := testConfig(t, t.TempDir())
	cfgB.NodeID, cfgB.NATS.URL = "node-b", a.Bus().ClientURL()
	b := startNode(t, cfgB)
	createSession(t, b, "on b")
	cfgC := testConfig(t, t.TempDir())
	cfgC.NodeID, cfgC.NATS.URL = "node-c", a.Bus().ClientURL()
	c := startNode(t, cfgC)

	if code := getAnon(t, a.URL()+"/api/v1/nodes"); code != 401 {
		t.Errorf("GET /api/v1/nodes without the key = %d, want 401", code)
	}
	for _, n := range []*Node{a, b} {
		testutil.WaitUntil(t, 30*time.Second, func() string {
			ns := listNodes(t, n)
			na, okA := ns["node-a"]
			nb, okB := ns["node-b"]
			if !okA || !okB {
				return fmt.Sprintf("nodes listed: %+v", ns)
			}
			if na.Stale || nb.Stale || na.State != "up" || nb.State != "up" {
				return fmt.Sprintf("want both up and fresh: %+v", ns)
			}
			// B has its session in a heartbeat after it was created.
			if na.Heartbeat.CapacityPPS != 20000 || nb.Heartbeat.CapacityPPS != 10_000_000 || nb.Heartbeat.Sessions != 1 || na.Heartbeat.Version != "test" {
				return fmt.Sprintf("heartbeats: %+v", ns)
			}
			return ""
		})
	}

	testutil.WaitFor(t, 30*time.Second, "node-a to hear node-c", func() bool {
		_, ok := listNodes(t, a)["node-c"]
		return ok
	})
	if v := metricValue(t, a, `convene_registry_nodes{state="up"}`); v != 3 {
		t.Errorf(`convene_registry_nodes{state="up"} = %v, want 3`, v)
	}
	b.Drain(context.Background())
	c.Bus().Conn().Close() // no draining, no stopped: its heartbeats just end
	testutil.WaitUntil(t, 30*time.Second, func() string {
		e := listNodes(t, a)["node-c"]
		if e.State != "up" || !e.Stale {
			return fmt.Sprintf("node-c %s, stale %v after %.1f s; want up and stale", e.State, e.Stale, e.AgeSeconds)
		}
		return ""
	})
	testutil.WaitUntil(t, 30*time.Second, func() string {
		e, ok := listNodes(t, a)["node-b"]
		if !ok {
			return "node-b gone from the list"
		}
		if e.State != "stopped" || !e.Stale {
			return fmt.Sprintf("node-b %s, stale %v after %.1f s", e.State, e.Stale, e.AgeSeconds)
		}
		return ""
	})
	if e := listNodes(t, a)["node-a"]; e.Stale || e.State != "up" {
		t.Errorf("node-a = %+v, want up and fresh", e)
	}
	if v := metricValue(t, a, `convene_registry_node_stale{node="node-b"}`); v != 1 {
		t.Errorf(`convene_registry_node_stale{node="node-b"} = %v, want 1`, v)
	}
	if v := metricValue(t, a, `convene_registry_nodes{state="stale"}`); v != 2 {
		t.Errorf(`convene_registry_nodes{state="stale"} = %v, want 2 (node-b, node-c)`, v)
	}
}
