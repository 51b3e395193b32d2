package ffmpeg

import (
	"bufio"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProcOptions configure a Proc.
type ProcOptions struct {
	// Name names the child in logs ("hls s_…").
	Name string
	// Path is the ffmpeg binary.
	Path string
	// Args are the child's arguments; called at every start, so a
	// restart can take a new configuration.
	Args func() []string
	// Stdout reads the child's standard output until it ends and calls
	// beat for each sign of life (a progress line, an image). nil counts
	// the lines that start with "progress=" (ffmpeg -progress pipe:1).
	Stdout func(r io.Reader, beat func())
	// Grace is how long a new child beats by itself while it probes its
	// input and has nothing to show yet; 10 s.
	Grace time.Duration
	// OnStart, if set, runs after each start (a feed asks for a keyframe).
	OnStart func()
	Logger  *slog.Logger
}

// Proc keeps one child process running until Stop.
type Proc struct {
	o ProcOptions

	beats    atomic.Uint64
	starts   atomic.Uint64
	mu       sync.Mutex
	cmd      *exec.Cmd
	started  time.Time
	stopping bool
	stop     chan struct{}
	done     chan struct{}
}

// Start starts the child and the goroutine that starts it again when it
// exits.
func Start(o ProcOptions) *Proc {
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Stdout == nil {
		o.Stdout = progressLines
	}
	p := &Proc{o: o, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// progressLines beats for every progress report of ffmpeg -progress.
func progressLines(r io.Reader, beat func()) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "progress=") {
			beat()
		}
	}
}

func (p *Proc) run() {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		t0 := time.Now()
		err := p.once()
		select {
		case <-p.stop:
			return
		default:
		}
		// A child that ran a while is started again at once; one that
		// keeps failing at start waits longer each time, up to 5 s.
		if time.Since(t0) > 5*time.Second {
			backoff = 100 * time.Millisecond
		} else if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
		p.o.Logger.Warn("ffmpeg child exited; starting it again", "child", p.o.Name, "err", err, "after", backoff)
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
	}
}

// once runs the child until it exits.
func (p *Proc) once() error {
	cmd := exec.Command(p.o.Path, p.o.Args()...)
	// The child dies with the node, whatever kills the node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	tail := &tailWriter{}
	cmd.Stderr = tail
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return nil
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return err
	}
	p.cmd, p.started = cmd, time.Now()
	p.mu.Unlock()
	p.starts.Add(1)
	if p.o.OnStart != nil {
		p.o.OnStart()
	}
	p.o.Stdout(out, func() { p.beats.Add(1) })
	_, _ = io.Copy(io.Discard, out)
	err = cmd.Wait()
	p.mu.Lock()
	p.cmd = nil
	p.mu.Unlock()
	if s := tail.String(); s != "" && err != nil {
		p.o.Logger.Warn("ffmpeg child said", "child", p.o.Name, "stderr", s)
	}
	return err
}

// Beats counts the child's signs of life, and during its first Grace the
// quarter seconds since it started: it probes its input then and shows
// nothing.
func (p *Proc) Beats() uint64 {
	p.mu.Lock()
	started, running := p.started, p.cmd != nil
	p.mu.Unlock()
	b := p.beats.Load() + p.starts.Load()
	if running {
		if d := time.Since(started); d < p.o.Grace {
			b += uint64(d / (250 * time.Millisecond))
		} else {
			b += uint64(p.o.Grace / (250 * time.Millisecond))
		}
	}
	return b
}

// PID is the running child's process ID, 0 between children.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts is how many children have been started.
func (p *Proc) Starts() uint64 { return p.starts.Load() }

// Kill ends the running child (it stopped beating, or its configuration
// changed); the Proc starts a new one.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

// Stop ends the child for good and waits for it.
func (p *Proc) Stop() {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.stopping = true
	close(p.stop)
	if p.cmd != nil && p.cmd.Process != nil {
		// ffmpeg ends its HLS playlist cleanly on SIGINT; a child that
		// does not go in 2 s is killed.
		_ = p.cmd.Process.Signal(syscall.SIGINT)
	}
	cmd := p.cmd
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-p.done
	}
}

// tailWriter keeps the last 2 KiB a child wrote to stderr.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2048 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-2048:]...)
	}
	t.mu.Unlock()
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
