package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/testutil"
)

// cluster is two or more nodes on one external NATS cluster (three
// nats-server processes with routes) and one PostgreSQL catalog, as
// issue 16's cluster mode runs them; logs keeps what every node logged.
type cluster struct {
	nats  *testutil.NATSCluster
	pg    *testutil.Postgres
	dsn   string
	logs  *testutil.Buffer
	nodes []*Node
}

func startCluster(t *testing.T, ids ...string) *cluster {
	t.Helper()
	c := &cluster{pg: testutil.NeedPostgres(t), nats: testutil.StartNATSCluster(t, 3), logs: &testutil.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() { // what the nodes' buses said, for the failure
			for _, l := range strings.Split(c.logs.String(), "\n") {
				if strings.Contains(l, "component=bus") || strings.Contains(l, "component=place") {
					t.Log(l)
				}
			}
		}
	})
	var err error
	if c.dsn, err = c.pg.CreateDatabase("cluster"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		c.nodes = append(c.nodes, c.start(t, id))
	}
	return c
}

// start starts a node of the cluster, drained when t ends; mods change
// its config.
func (c *cluster) start(t *testing.T, id string, mods ...func(*config.Config)) *Node {
	t.Helper()
	cfg := c.config(t, id, mods...)
	log := slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n, err := Start(context.Background(), cfg, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Drain(context.Background()) })
	return n
}

// config is the configuration of node id of the cluster, in a data dir
// of its own; mods change it.
func (c *cluster) config(t *testing.T, id string, mods ...func(*config.Config)) config.Config {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.NodeID = id
	cfg.NATS.URL = c.nats.URLs()
	cfg.Auth.TokenSecret = "the cluster's shared token secret, for tests" // nodes admit each other's members
	cfg.Catalog.Driver, cfg.Catalog.DSN = config.DriverPostgres, c.dsn
	for _, mod := range mods {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nextCreated waits up to d for the "created" event of session sid on sub.
func nextCreated(sub *nats.Subscription, sid string, d time.Duration) bool {
	want := "convene.session." + sid + ".created"
	for end := time.Now().Add(d); time.Now().Before(end); {
		m, err := sub.NextMsg(time.Until(end))
		if err != nil {
			return false
		}
		if m.Subject == want {
			return true
		}
	}
	return false
}

// TestClusterOnNATSAndPostgres: two nodes on three routed nats-server
// processes and one PostgreSQL catalog. A session created through node A
// is read through node B; its event, published by A, reaches a subscriber
// on B's connection; and when the nats-server A is attached to is killed
// and started again, A reconnects, its events reach B again and each
// node's registry lists the other as up.
func TestClusterOnNATSAndPostgres(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	if a.Bus().Embedded() || b.Bus().Embedded() {
		t.Fatal("a node embedded NATS although nats.url was set")
	}

	sub, err := b.Bus().Conn().SubscribeSync("convene.session.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Bus().Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	// B's interest reaches A's server through the routes in a moment:
	// sessions are created until one's event arrives, never a timed wait.
	var s sessionJSON
	testutil.WaitUntil(t, 30*time.Second, func() string {
		s = createSession(t, a, "spans nodes")
		if !nextCreated(sub, s.ID, 500*time.Millisecond) {
			return "no created event from node A reached node B's subscriber"
		}
		return ""
	})

	var got sessionJSON
	if code := call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 || got.ID != s.ID {
		t.Fatalf("GET the session through node B: %d %+v", code, got)
	}
	var list struct{ Sessions []sessionJSON }
	if code := call(t, "GET", b.URL()+"/api/v1/sessions", nil, &list); code != 200 || len(list.Sessions) == 0 {
		t.Fatalf("list through node B: %d %+v", code, list)
	}

	// Kill the server A is attached to, then start it again.
	nc := a.Bus().Conn()
	attached := c.nats.ByURL(nc.ConnectedUrl())
	if attached == nil {
		t.Fatalf("node A is attached to %q, none of %s", nc.ConnectedUrl(), c.nats.URLs())
	}
	before := nc.Stats().Reconnects
	attached.Kill(t)
	attached.Start(t)
	testutil.WaitFor(t, 60*time.Second, "node A to reconnect", func() bool {
		return nc.IsConnected() && nc.Stats().Reconnects > before
	})
	c.nats.WaitRouted(t)
	testutil.WaitUntil(t, 30*time.Second, func() string {
		s = createSession(t, a, "after the restart")
		if !nextCreated(sub, s.ID, 500*time.Millisecond) {
			return "after the restart of " + attached.Name + ", no created event from node A reached node B"
		}
		return ""
	})
	if code := call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 {
		t.Fatalf("GET the new session through node B: %d", code)
	}
	// Each node's registry hears the other's heartbeats across the routes.
	for _, pair := range [][2]*Node{{a, b}, {b, a}} {
		at, other := pair[0], pair[1]
		testutil.WaitUntil(t, 30*time.Second, func() string {
			e, ok := listNodes(t, at)[other.cfg.NodeID]
			if !ok || e.Stale || e.State != "up" {
				return fmt.Sprintf("%s lists %s as %+v (listed %v)", at.cfg.NodeID, other.cfg.NodeID, e, ok)
			}
			return ""
		})
	}
	// Node A's /healthz sees NATS and PostgreSQL again.
	if code := call(t, "GET", a.URL()+"/healthz", nil, nil); code != 200 {
		t.Errorf("node A /healthz = %d after the reconnect", code)
	}

	// The catalog's password was never logged.
	if strings.Contains(c.logs.String(), c.pg.Password()) {
		t.Error("a node logged the PostgreSQL password")
	}
}
