package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSCluster is a cluster of nats-server processes on loopback, joined by
// routes: the external NATS of a Convene cluster. The binary is built from
// the nats-server module the go.mod requires (v2.15.2), so the test runs
// the server version the node embeds, not whatever a package manager has.
type NATSCluster struct {
	Servers []*NATSServer
}

// NATSServer is one server of a NATSCluster. It keeps its ports across
// Kill and Start, as a restarted server would.
type NATSServer struct {
	Name        string
	ClientPort  int
	ClusterPort int

	args   []string
	bin    string
	log    string // its output, for a failure's message
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartNATSCluster builds nats-server into a temp dir, starts n servers
// with routes to each other, and waits until a message crosses between
// every pair. The servers are killed when t ends.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server from its module: %v: %s", err, out)
	}
	ports := FreeTCPPorts(t, 2*n)
	var routes []string
	for i := 0; i < n; i++ {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[n+i]))
	}
	c := &NATSCluster{}
	for i := 0; i < n; i++ {
		s := &NATSServer{Name: fmt.Sprintf("nats-%d", i), ClientPort: ports[i], ClusterPort: ports[n+i], bin: bin,
			log: filepath.Join(dir, fmt.Sprintf("nats-%d.log", i))}
		s.args = []string{"-n", s.Name, "-a", "127.0.0.1", "-p", strconv.Itoa(s.ClientPort),
			"--cluster_name", "convene-test", "--cluster", "nats://127.0.0.1:" + strconv.Itoa(s.ClusterPort),
			"--routes", strings.Join(routes, ",")}
		c.Servers = append(c.Servers, s)
		s.Start(t)
	}
	t.Cleanup(func() {
		for _, s := range c.Servers {
			s.Kill(t)
		}
	})
	c.WaitRouted(t)
	return c
}

// URLs is the client URL of every server, comma-separated, as nats.url
// takes it.
func (c *NATSCluster) URLs() string {
	var us []string
	for _, s := range c.Servers {
		us = append(us, s.URL())
	}
	return strings.Join(us, ",")
}

// ByURL returns the server whose client URL is url (nats.Conn.ConnectedUrl
// names it), or nil.
func (c *NATSCluster) ByURL(url string) *NATSServer {
	for _, s := range c.Servers {
		if s.URL() == url {
			return s
		}
	}
	return nil
}

// WaitRouted waits until a request sent through each running server is
// answered through each other one: the routes are up and interest has
// spread.
func (c *NATSCluster) WaitRouted(t testing.TB) {
	t.Helper()
	var conns []*nats.Conn
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		nc := s.connect(t)
		defer nc.Close()
		conns = append(conns, nc)
	}
	for i, nc := range conns {
		subj := fmt.Sprintf("convene.test.routed.%d", i)
		sub, err := nc.Subscribe(subj, func(m *nats.Msg) { m.Respond(nil) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		nc.Flush()
		for j, other := range conns {
			if j == i {
				continue
			}
			WaitFor(t, 30*time.Second, fmt.Sprintf("a request from %s answered through %s", other.ConnectedServerName(), nc.ConnectedServerName()), func() bool {
				_, err := other.Request(subj, nil, 100*time.Millisecond)
				return err == nil
			})
		}
	}
}

// URL is the server's client URL.
func (s *NATSServer) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.ClientPort) }

// Running reports whether the process has been started and not reaped.
func (s *NATSServer) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Start starts the server (again, after Kill) on its ports and waits until
// it takes clients.
func (s *NATSServer) Start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // if the test binary dies first
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.Name, err)
	}
	exited, cmd := make(chan struct{}), s.cmd
	s.exited = exited
	go func() { cmd.Wait(); close(exited) }()
	nc := s.connect(t)
	nc.Close()
}

// connect waits until the server takes a client.
func (s *NATSServer) connect(t testing.TB) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	WaitUntil(t, 30*time.Second, func() string {
		if !s.Running() {
			b, _ := os.ReadFile(s.log)
			t.Fatalf("%s exited: %s", s.Name, b)
		}
		var err error
		if nc, err = nats.Connect(s.URL(), nats.Timeout(time.Second)); err != nil {
			time.Sleep(20 * time.Millisecond)
			return fmt.Sprintf("%s takes no clients: %v", s.Name, err)
		}
		return ""
	})
	return nc
}

// Kill stops the server with SIGKILL, by its PID, and reaps it: no
// goodbye to its clients or routes, as when its machine fails.
func (s *NATSServer) Kill(t testing.TB) {
	t.Helper()
	if !s.Running() {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
}

// FreeTCPPorts returns n TCP ports on 127.0.0.1 that were free a moment
// ago, for servers that must keep their ports across restarts (another
// process could take one in between; tests accept that small risk).
func FreeTCPPorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
