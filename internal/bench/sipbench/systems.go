package sipbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/sipusers"

	"github.com/convene/convene/internal/bench/proc"
)

// Domain is the SIP domain both systems serve in the benchmark.
const Domain = "bench.test"

// Password is every benchmark user's password.
const Password = "bench-password"

// server is a system under test, running as a child process.
type server struct {
	name    string
	addr    string // SIP host:port
	httpURL string // Convene only: for pprof
	cmd     *exec.Cmd
	logTail *tailBuffer
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the process by its PID: SIGTERM, then SIGKILL after 10 s.
func (s *server) stop() { proc.Stop(s.cmd, 10*time.Second) }

// cpuSeconds is the user+system CPU time so far of the process and its
// children (Kamailio's workers are child processes).
func (s *server) cpuSeconds() float64 { return proc.TreeCPU(s.pid()) }

// freePort returns a port free for UDP and TCP a moment ago.
func freePort() (int, error) {
	for range 50 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := c.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		c.Close()
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("sipbench: no free port")
}

// addUsers writes the benchmark accounts into a fresh catalog at dsn.
func addUsers(ctx context.Context, dsn string, users []string) error {
	cat, err := catalog.Open(ctx, "sqlite", dsn)
	if err != nil {
		return err
	}
	defer cat.Close()
	us, err := sipusers.New(sipusers.Options{Catalog: cat, Realm: Domain})
	if err != nil {
		return err
	}
	for _, u := range users {
		if _, err := us.Add(ctx, u, Password); err != nil {
			return err
		}
	}
	return nil
}

// The relay's port range in the call benchmark: 10,000 RTP/RTCP pairs,
// below the kernel's ephemeral ports (32768-60999 by default) so no
// SIPp or server socket takes one. Calls hold their ports from INVITE to
// BYE; a short stall of the machine at 2,000 calls/s piles up several
// hundred calls at once, and a range of 2,000 pairs ran out.
const relayPortMin, relayPortMax = 12000, 31999

var runningRE = regexp.MustCompile(`http://[0-9.:]+`)

// startConvene runs `convene serve` (bin) on fresh ports with the users in
// its catalog. Rate limits and contact probing are off (one SIPp is one
// source, and so may hold every relay stream), MD5 is challenged first (SIPp 3.6 reads only the first
// challenge) and INVITEs are not challenged, as in Kamailio's config.
func startConvene(ctx context.Context, bin, dir string, users []string) (*server, error) {
	data := filepath.Join(dir, "convene-data")
	if err := os.RemoveAll(data); err != nil { // a fresh node for every point
		return nil, err
	}
	if err := addUsers(ctx, filepath.Join(data, "convene.db"), users); err != nil {
		return nil, fmt.Errorf("sipbench: users: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "serve", "-data-dir", data, "-http-addr", "127.0.0.1:0", "-rtp-port", "0", "-webrtc-enabled=false",
		"-http-pprof", "-log-level", "warn", "-sip-listen", addr, "-sip-domain", Domain,
		"-sip-register-rate", "0", "-sip-invite-rate", "0", "-sip-request-rate", "0", "-sip-probe-interval", "0",
		"-sip-algorithms", "MD5,SHA-256", "-sip-auth-calls=false",
		"-relay-port-min", strconv.Itoa(relayPortMin), "-relay-port-max", strconv.Itoa(relayPortMax),
		"-relay-max-streams-per-source", strconv.Itoa((relayPortMax-relayPortMin+1)/4)) // one SIPp is one source
	s := &server{name: "Convene", addr: addr, cmd: cmd, logTail: &tailBuffer{}}
	cmd.Stderr = s.logTail
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sipbench: start convene: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		line <- l
		io.Copy(io.Discard, r)
	}()
	select {
	case l := <-line:
		s.httpURL = runningRE.FindString(l)
		if s.httpURL == "" {
			s.stop()
			return nil, fmt.Errorf("sipbench: convene did not start: %q\n%s", l, s.logTail.String())
		}
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("sipbench: convene did not start in 30 s\n%s", s.logTail.String())
	}
	return s, nil
}

// startKamailio runs kamailio with cfg in mode ("" or "WITH_NONCE_REUSE"),
// the given number of UDP workers, 1 GiB of shared memory and a UDP
// receive buffer of up to 4 MiB (-b; its default stops at 256 KiB, and at
// a few thousand registrations/s the kernel dropped requests at its socket).
func startKamailio(ctx context.Context, cfg, dir, mode string, workers int) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	run := filepath.Join(dir, "kamailio-run-"+strconv.Itoa(port))
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// 1 GiB of shared memory: with the default 64 MiB, tm runs out of
	// transactions at a few hundred calls per second ("out of mem").
	args := []string{"-f", cfg, "-DD", "-E", "-n", strconv.Itoa(workers), "-m", "1024", "-M", "32", "-b", sippBuffer, "-l", "udp:" + addr, "-Y", run,
		"-A", `CTL_SOCK="unix:` + filepath.Join(run, "ctl") + `"`, "-A", `AUTH_PASSWORD="` + Password + `"`}
	if mode != "" {
		args = append(args, "-A", mode)
	}
	cmd := exec.Command("kamailio", args...)
	s := &server{name: "Kamailio", addr: addr, cmd: cmd, logTail: &tailBuffer{}}
	cmd.Stdout, cmd.Stderr = s.logTail, s.logTail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sipbench: start kamailio: %w", err)
	}
	// Ready when it answers an OPTIONS (404 or 200 both do).
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if sipPing(addr) {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("sipbench: kamailio did not answer on %s\n%s", addr, s.logTail.String())
}

// sipPing sends an OPTIONS and reports whether any response came back.
func sipPing(addr string) bool {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	lp := c.LocalAddr().(*net.UDPAddr).Port
	msg := fmt.Sprintf("OPTIONS sip:%s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-ping%d\r\n"+
		"Max-Forwards: 70\r\nFrom: <sip:ping@127.0.0.1>;tag=p%d\r\nTo: <sip:%s>\r\nCall-ID: ping-%d\r\n"+
		"CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", addr, lp, time.Now().UnixNano(), lp, addr, time.Now().UnixNano())
	c.Write([]byte(msg))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return err == nil && strings.HasPrefix(string(buf[:n]), "SIP/2.0 ")
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8192 {
		t.b = t.b[len(t.b)-8192:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
