package node

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/testutil"
)

// TestExternalNATS runs the node against a real nats-server process (the
// Debian package) instead of the embedded one: only the URL changes.
func TestExternalNATS(t *testing.T) {
	bin := testutil.NeedBinary(t, "nats-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	var nc *nats.Conn
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if nc, err = nats.Connect(url); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("nats-server did not come up: %v", err)
		}
	}
	defer nc.Close()
	events, err := nc.SubscribeSync("convene.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	cfg := testConfig(t, t.TempDir())
	cfg.NATS.URL = url
	n := startNode(t, cfg)
	if n.Bus().Embedded() {
		t.Fatal("node embedded a server although a URL was given")
	}
	s := createSession(t, n, "external")
	want := map[string]bool{"convene.session." + s.ID + ".created": false, "convene.node.test-node.heartbeat": false}
	for missing := len(want); missing > 0; {
		m, err := events.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("events %v: %v", want, err)
		}
		if seen, ok := want[m.Subject]; ok && !seen {
			want[m.Subject] = true
			missing--
		}
	}
}
