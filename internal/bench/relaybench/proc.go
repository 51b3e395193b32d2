package relaybench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/relay/ng"
)

// Relay is a relay process under test.
type Relay struct {
	Name    string
	Version string
	NG      *ng.Client
	cmd     *exec.Cmd
	log     *tail
	exited  chan struct{}
	waitErr error
}

// StartConvene runs `bin relay` (Convene's standalone relay) with its ng
// control on a free loopback port and media ports in [portMin, portMax];
// kernel chooses its kernel fast path (relay.kernel). With the fast path
// asked for, a relay that could not load it is an error, so that a report
// never shows the user-space figure under the fast path's name.
func StartConvene(name, bin string, portMin, portMax int, kernel bool) (*Relay, error) {
	ngAddr, err := freeUDP()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "relay", "-relay-addr", "127.0.0.1", "-relay-ng-addr", ngAddr,
		"-relay-port-min", strconv.Itoa(portMin), "-relay-port-max", strconv.Itoa(portMax), "-log-level", "warn",
		"-relay-kernel="+strconv.FormatBool(kernel))
	r, err := start(name, cmd, ngAddr)
	if err == nil && kernel && strings.Contains(r.log.String(), "kernel fast path unavailable") {
		r.Stop()
		return nil, fmt.Errorf("the kernel fast path did not load (it needs root): %s", r.log)
	}
	if err != nil {
		return nil, err
	}
	out, _ := exec.Command(bin, "version").Output()
	r.Version = strings.TrimSpace(string(out))
	return r, nil
}

// StartRTPEngine runs rtpengine in the foreground, forwarding in userspace
// (--table=-1: no kernel module), on 127.0.0.1.
func StartRTPEngine(portMin, portMax int) (*Relay, error) {
	bin, err := exec.LookPath("rtpengine")
	if err != nil {
		return nil, fmt.Errorf("rtpengine is not installed (apt-get install rtpengine-daemon; scripts/install-deps.sh bench does it)")
	}
	ngAddr, err := freeUDP()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--interface=127.0.0.1", "--listen-ng="+ngAddr, "--foreground", "--log-stderr",
		"--table=-1", "--port-min="+strconv.Itoa(portMin), "--port-max="+strconv.Itoa(portMax), "--log-level=5",
		"--timeout=60", "--delete-delay=0", "--pidfile=/dev/null")
	r, err := start("rtpengine", cmd, ngAddr)
	if err != nil {
		return nil, err
	}
	out, _ := exec.Command(bin, "--version").CombinedOutput()
	r.Version = strings.TrimSpace(strings.TrimPrefix(firstLine(string(out)), "Version: "))
	return r, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func start(name string, cmd *exec.Cmd, ngAddr string) (*Relay, error) {
	t := &tail{}
	cmd.Stdout, cmd.Stderr = t, t
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r := &Relay{Name: name, cmd: cmd, log: t, exited: make(chan struct{})}
	go func() { r.waitErr = cmd.Wait(); close(r.exited) }()
	c, err := ng.Dial(ngAddr)
	if err != nil {
		r.Stop()
		return nil, err
	}
	c.Timeout = 200 * time.Millisecond
	r.NG = c
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = c.Ping(); err == nil {
			break
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("%s exited at start (%v); its output:\n%s", name, r.waitErr, t)
		default:
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("%s did not answer ng ping on %s: %v; its output:\n%s", name, ngAddr, err, t)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Timeout = 2 * time.Second
	return r, nil
}

// PID returns the process ID (0 for an in-process relay).
func (r *Relay) PID() int {
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// CPUSeconds returns the user+system CPU time the process has used.
func (r *Relay) CPUSeconds() float64 {
	if r.cmd == nil {
		return 0
	}
	_, cpu, _ := proc.Process(r.PID())
	return cpu
}

// Stop ends the process by its PID: SIGTERM, then SIGKILL after 5 s.
func (r *Relay) Stop() {
	if r.NG != nil {
		r.NG.Close()
	}
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// Output returns the end of the process's output, for error messages.
func (r *Relay) Output() string { return r.log.String() }

func freeUDP() (string, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.LocalAddr().String(), nil
}

// tail keeps the last 8 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8192 {
		t.buf = t.buf[len(t.buf)-8192:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(t.buf)))
	for sc.Scan() {
		b.WriteString("  " + sc.Text() + "\n")
	}
	return b.String()
}

var _ io.Writer = (*tail)(nil)
