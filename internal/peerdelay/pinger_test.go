package peerdelay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/bus"
)

func table(p *Pinger) map[string]bus.PeerRTT {
	out := map[string]bus.PeerRTT{}
	for _, pr := range p.Peers() {
		out[pr.Node] = pr
	}
	return out
}

// TestSmoothingAndLoss: the first reply sets the SRTT, later ones move it
// by an eighth of the difference; loss is the share of unanswered probes
// among the last 16, and the SRTT stays when probes are lost.
func TestSmoothingAndLoss(t *testing.T) {
	p := New(Options{Self: "a", Peers: func() []string { return nil }})
	p.observe("b", 8*time.Millisecond, true)
	if got := table(p)["b"]; got.RTTSeconds != 0.008 || got.Loss != 0 {
		t.Fatalf("after one reply: %+v", got)
	}
	p.observe("b", 16*time.Millisecond, true) // 8 + (16-8)/8 = 9 ms
	p.observe("b", 0, false)
	p.observe("b", 0, false)
	got := table(p)["b"]
	if got.RTTSeconds != 0.009 || got.Loss != 0.5 {
		t.Fatalf("after 2 replies and 2 timeouts: %+v, want 9 ms and 0.5", got)
	}
	for i := 0; i < window; i++ {
		p.observe("b", 9*time.Millisecond, true)
	}
	if got := table(p)["b"]; got.Loss != 0 {
		t.Errorf("16 replies later, loss %v: the window forgets", got.Loss)
	}
	for i := 0; i < window+3; i++ {
		p.observe("c", 0, false)
	}
	if got := table(p)["c"]; got.Loss != 1 || got.RTTSeconds != 0 {
		t.Errorf("a peer that never answered: %+v, want loss 1, no RTT", got)
	}
}

// TestProbesOverNATS: two nodes on an embedded nats-server, each answering
// on its subject, measure each other; a listed node that does not answer
// counts as lost; a node no longer listed leaves the table and /metrics.
func TestProbesOverNATS(t *testing.T) {
	b, err := bus.Connect(context.Background(), bus.Options{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	nb, err := b.Dial("b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.Close)
	for id, nc := range map[string]*nats.Conn{"a": b.Conn(), "b": nb} {
		stop, err := Respond(nc, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	listed := []string{"a", "b", "silent"}
	pa := New(Options{Conn: b.Conn(), Self: "a", Peers: func() []string { return listed }, Timeout: 5 * time.Second, Interval: 10 * time.Second})
	pb := New(Options{Conn: nb, Self: "b", Peers: func() []string { return listed }, Timeout: 5 * time.Second, Interval: 10 * time.Second})
	for i := 0; i < 3; i++ {
		pa.Round(context.Background())
		pb.Round(context.Background())
	}
	ta, tb := table(pa), table(pb)
	if _, ok := ta["a"]; ok {
		t.Errorf("a probed itself: %+v", ta)
	}
	if ta["b"].RTTSeconds <= 0 || ta["b"].Loss != 0 || tb["a"].RTTSeconds <= 0 || tb["a"].Loss != 0 {
		t.Errorf("a's table %+v, b's %+v: want each other's RTT > 0, no loss", ta, tb)
	}
	if ta["silent"].Loss != 1 || ta["silent"].RTTSeconds != 0 {
		t.Errorf("silent node: %+v, want loss 1 and no RTT", ta["silent"])
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(pa.Collector())
	if n := testutil.CollectAndCount(pa.Collector(), "convene_cluster_peer_rtt_seconds"); n != 2 {
		t.Errorf("%d rtt series, want 2 (b, silent)", n)
	}
	listed = []string{"a", "b"}
	pa.Round(context.Background())
	if n := testutil.CollectAndCount(pa.Collector(), "convene_cluster_peer_rtt_seconds"); n != 1 {
		t.Errorf("%d rtt series after silent was forgotten, want 1", n)
	}
	want := `
# HELP convene_cluster_peer_loss_ratio Share of the last 16 delay probes to the peer node that got no reply.
# TYPE convene_cluster_peer_loss_ratio gauge
convene_cluster_peer_loss_ratio{peer="b"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "convene_cluster_peer_loss_ratio"); err != nil {
		t.Error(err)
	}
}
