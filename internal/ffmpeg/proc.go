package ffmpeg

import (
	"bufio"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
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
	// restart can take a new configuration. The child's file descriptor
	// 3 is a pipe whose "progress=" lines are its beats: give ffmpeg
	// ProgressArgs.
	Args func() []string
	// Stdout, if set, reads the child's standard output until it ends
	// (images); nil discards it.
	Stdout func(r io.Reader)
	// Grace is how long a new child beats by itself while it probes its
	// input and has nothing to show yet; 10 s.
	Grace time.Duration
	// OnStart, if set, runs after each start (a feed asks for a keyframe).
	OnStart func()
	// Rekey, if set, has the child's video feeds ask their sources for
	// keyframes again (Feed.AskKeyframe); CheckKeyframes calls it.
	Rekey  func()
	Logger *slog.Logger
}

// KeyAgain is how long a child may go without making a frame before its
// feeds ask their sources for keyframes again (CheckKeyframes): a
// keyframe that reaches the child's port before ffmpeg binds it is lost,
// and a browser sends the next only when asked.
const KeyAgain = 2 * time.Second

// Proc keeps one child process running until Stop.
type Proc struct {
	o ProcOptions

	beats   atomic.Uint64
	killed  atomic.Bool // the child's end was asked for
	starts  atomic.Uint64
	mu      sync.Mutex
	cmd     *exec.Cmd
	started time.Time
	alive   time.Time // the running child's first beat (zero before it)
	// frames is the running child's last "frame=" progress line; asked
	// is when its feeds last asked for keyframes (its start, Rekey).
	frames   atomic.Uint64
	asked    time.Time
	framesAt uint64
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
	p := &Proc{o: o, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// ProgressArgs make ffmpeg report its progress on the pipe a Proc counts
// as its beats, four times a second.
var ProgressArgs = []string{"-progress", "pipe:3", "-stats_period", "0.25"}

// progressLines beats for every progress report of ffmpeg -progress and
// hands on its count of frames made.
func progressLines(r io.Reader, beat func(), frames func(uint64)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "progress=") {
			beat()
		} else if n, ok := strings.CutPrefix(line, "frame="); ok {
			if v, err := strconv.ParseUint(strings.TrimSpace(n), 10, 64); err == nil {
				frames(v)
			}
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
		// A child that ran a while, or that we ended (Kill), is started
		// again at once; one that keeps failing at start waits longer
		// each time, up to 5 s.
		if time.Since(t0) > 5*time.Second || p.killed.Swap(false) {
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
	var out io.Reader
	if p.o.Stdout != nil {
		var err error
		if out, err = cmd.StdoutPipe(); err != nil {
			return err
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd.ExtraFiles = []*os.File{pw} // fd 3
	tail := &tailWriter{}
	cmd.Stderr = tail
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return nil
	}
	err = cmd.Start()
	pw.Close() // the child has its own copy
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.cmd, p.started, p.alive = cmd, time.Now(), time.Time{}
	p.frames.Store(0)
	p.asked, p.framesAt = p.started, 0 // OnStart asks
	p.mu.Unlock()
	p.starts.Add(1)
	if p.o.OnStart != nil {
		p.o.OnStart()
	}
	progress := make(chan struct{})
	go func() {
		defer close(progress)
		progressLines(pr, p.beat, p.frames.Store)
	}()
	if out != nil {
		p.o.Stdout(out)
		_, _ = io.Copy(io.Discard, out)
	}
	<-progress
	err = cmd.Wait()
	p.mu.Lock()
	p.cmd = nil
	p.frames.Store(0)
	p.mu.Unlock()
	if s := tail.String(); s != "" && err != nil {
		p.o.Logger.Warn("ffmpeg child said", "child", p.o.Name, "stderr", s)
	}
	return err
}

// beat counts a sign of life of the running child.
func (p *Proc) beat() {
	p.beats.Add(1)
	p.mu.Lock()
	if p.alive.IsZero() {
		p.alive = time.Now()
	}
	p.mu.Unlock()
}

// Frames is the running child's count of frames made, from its progress
// reports (0 before the first, and between children).
func (p *Proc) Frames() uint64 { return p.frames.Load() }

// CheckKeyframes calls Rekey when the running child has made no frame
// since its feeds last asked for keyframes (its start) and KeyAgain has
// passed since; the owner calls it from its own ticker. Once the child
// makes frames it asks no more.
func (p *Proc) CheckKeyframes(now time.Time) {
	p.mu.Lock()
	due := p.cmd != nil && p.o.Rekey != nil && now.Sub(p.asked) >= KeyAgain && p.frames.Load() == p.framesAt
	if due {
		p.asked = now
	}
	p.mu.Unlock()
	if due {
		p.o.Rekey()
	}
}

// Beats counts the child's signs of life, and the quarter seconds from
// its start to its first sign, up to Grace: it probes its input then and
// shows nothing. Once it has shown life, only its own beats count.
func (p *Proc) Beats() uint64 {
	p.mu.Lock()
	started, alive, running := p.started, p.alive, p.cmd != nil
	p.mu.Unlock()
	b := p.beats.Load() + p.starts.Load()
	if running {
		d := time.Since(started)
		if !alive.IsZero() {
			d = alive.Sub(started)
		}
		b += uint64(min(d, p.o.Grace) / (250 * time.Millisecond))
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
		p.killed.Store(true)
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
	if len(t.buf) > 8192 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-8192:]...)
	}
	t.mu.Unlock()
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
