package chatbench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRun drives a real node (bin/convene, from make build) with two small
// steps: every message sent reaches every other member of its session,
// and the report has both. Nothing here is timed: the bar (p99) may pass
// or not on a busy machine.
func TestRun(t *testing.T) {
	bin, _ := filepath.Abs("../../../bin/convene")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("no bin/convene: run make build")
	}
	if testing.Short() {
		t.Skip("starts a node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := t.TempDir()
	res, err := Run(ctx, Config{Convene: bin, Members: []int{3}, Rates: []int{30, 60}, Rate: 20, Size: 32,
		Window: time.Second, Drain: 20 * time.Second, Budget: time.Minute, Tmp: t.TempDir(), Log: io.Discard, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Series[0]
	if s.Joins.N < 3 || s.Note != "" || len(s.Points) == 0 {
		t.Fatalf("%+v", s)
	}
	for _, p := range s.Points {
		if p.Sent == 0 || p.Refused != 0 || p.Gone != 0 || p.Expected != 2*p.Sent || p.Received != p.Expected || p.Lost != 0 {
			t.Errorf("%d msg/s: sent %d, refused %d, gone %d, %d of %d deliveries", p.Offered, p.Sent, p.Refused, p.Gone, p.Received, p.Expected)
		}
		if p.Order.N != p.Received {
			t.Errorf("%d msg/s: %d deliveries ordered, %d received", p.Offered, p.Order.N, p.Received)
		}
	}
	if _, err := Write(out, res); err != nil {
		t.Fatal(err)
	}
}
