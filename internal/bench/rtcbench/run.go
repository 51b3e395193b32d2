package rtcbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/janus"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/rtctest"
)

// Config is one run.
type Config struct {
	Convene   string   // the server binary
	Self      string   // this benchmark binary (runs `rtc-load`)
	Systems   []string // "convene", "janus"
	Scenarios []string // "audio", "av" (audio and simulcast video)
	Steps     []int    // subscriber counts
	Window    time.Duration
	Budget    time.Duration
	Tmp       string
	Log       io.Writer
	// Out, when set, receives a CPU profile of Convene over each step's
	// window (<date>-webrtc-<scenario>-<n>.pprof), to see where the time goes.
	Out string
	// ServeArgs are added to `convene serve` (e.g. -webrtc-udp-port 0).
	ServeArgs []string
	// Pin gives the server CPU 0 to itself and runs the load process and
	// the publisher on the other CPUs.
	Pin bool
}

// Point is one step: n subscribers of one publisher.
type Point struct {
	N    int        `json:"n"`
	Load LoadResult `json:"load"`
	// CPU is the server's CPU over the window, in cores.
	CPU float64 `json:"cpu_cores"`
	// CPUPerSub is CPU per subscriber, in milliseconds of CPU a second.
	CPUPerSub float64 `json:"cpu_ms_per_s_per_subscriber"`
	// PPSPerCore is the SRTP packets a second subscribers received per
	// core of the server's CPU.
	PPSPerCore float64 `json:"srtp_pps_per_core"`
	// MachineBusy is the share of the machine's CPUs busy over the window
	// (server, load process and everything else).
	MachineBusy float64 `json:"machine_busy_pct"`
	OK          bool    `json:"ok"`
	// NodeDelayP95 is the 95th percentile of the server's own forwarding
	// delay (queue to send) over the window, ms; Convene only.
	NodeDelayP95 float64 `json:"node_delay_p95_ms,omitempty"`
	// Retry: the step missed the bar once and this is its second try.
	Retry bool `json:"retry,omitempty"`
}

// Series is one system in one scenario.
type Series struct {
	System   string  `json:"system"`
	Version  string  `json:"version"`
	Scenario string  `json:"scenario"`
	Points   []Point `json:"points"`
	// MaxOK is the most subscribers served at the quality bar.
	MaxOK int    `json:"max_ok"`
	Note  string `json:"note,omitempty"`
}

// Result is a whole run.
type Result struct {
	Date    time.Time `json:"date"`
	CPUs    int       `json:"cpus"`
	Window  string    `json:"window"`
	Series  []Series  `json:"series"`
	Notes   []string  `json:"notes,omitempty"`
	JoinP50 float64   `json:"convene_join_p50_ms"`
	// Pinned: each server ran on one CPU of its own, the load on the rest.
	Pinned bool `json:"pinned"`
}

// Quality bar: a step counts when every subscriber joined, loss is under
// 1% and the 95th percentile one-way latency under 100 ms. The recording
// benchmark (recbench) holds live listeners to the same figures: a packet
// later than MaxP95ms is late there.
const (
	MaxLoss  = 0.01
	MaxP95ms = 100
)

// Run measures every scenario and system.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Window: cfg.Window.String()}
	for _, sys := range cfg.Systems {
		if sys == "convene" {
			res.Notes = append(res.Notes, "`convene serve` ran with `"+strings.Join(admissionLifted, " ")+
				"`: the node's admission (its measured delivery capacity, its cap of peer connections and of a session's members) lifted, so that forwarding quality decides, as for Janus, which has no such limit")
		}
	}
	if cfg.Pin {
		if err := proc.PinSelf(); err != nil {
			return res, err
		}
		res.Pinned = true
	}
	// Each series gets an equal share of the budget, so the first one
	// cannot starve the others.
	share := cfg.Budget / time.Duration(max(1, len(cfg.Scenarios)*len(cfg.Systems)))
	for _, sc := range cfg.Scenarios {
		for _, sys := range cfg.Systems {
			end := time.Now().Add(share)
			s, err := runSeries(ctx, cfg, sys, sc, end)
			if err != nil {
				s.Note = err.Error()
			}
			res.Series = append(res.Series, s)
			if sys == "convene" && sc == "av" && len(s.Points) > 0 {
				res.JoinP50 = s.Points[0].Load.JoinP50
			}
		}
	}
	return res, nil
}

type server interface {
	pid() int
	stop()
}

// profiler is a server that can be profiled over HTTP (Convene).
type profiler interface {
	profile(seconds int, path string)
}

type pidStop struct {
	p int
	s func()
}

func (p pidStop) pid() int { return p.p }
func (p pidStop) stop()    { p.s() }

func runSeries(ctx context.Context, cfg Config, sys, scenario string, end time.Time) (Series, error) {
	s := Series{System: sys, Scenario: scenario}
	opt := rtctest.Options{Audio: true}
	if scenario == "av" {
		opt.Video, opt.Simulcast = true, true
	}
	var (
		srv     server
		base    LoadConfig
		cleanup []func()
	)
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	mctx, mcancel := context.WithCancel(ctx)
	cleanup = append(cleanup, mcancel)
	switch sys {
	case "convene":
		n, err := startConvene(cfg)
		if err != nil {
			return s, err
		}
		srv = n
		cleanup = append(cleanup, n.stop)
		s.Version = n.Version
		sid, err := n.session()
		if err != nil {
			return s, err
		}
		tok, err := n.join(sid)
		if err != nil {
			return s, err
		}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		pub, err := rtctest.Dial(dctx, n.URL, sid, tok, opt)
		if err != nil {
			return s, err
		}
		cleanup = append(cleanup, pub.Close)
		if err := pub.Publish(dctx); err != nil {
			return s, err
		}
		go pub.Media(mctx)
		base = LoadConfig{System: "convene", URL: n.URL, Session: sid}
		base.Tokens = nil
		s.Note = ""
		stepTokens := func(k int) ([]string, error) {
			var ts []string
			for range k {
				t, err := n.join(sid)
				if err != nil {
					return nil, err
				}
				ts = append(ts, t)
			}
			return ts, nil
		}
		return steps(ctx, cfg, s, srv, base, stepTokens, end)
	case "janus":
		j, err := startJanus(filepath.Join(cfg.Tmp, "janus-"+scenario), cfg.Pin)
		if err != nil {
			return s, err
		}
		srv = pidStop{j.PID(), j.Stop}
		cleanup = append(cleanup, j.Stop)
		s.Version = j.Version
		opt.Interface = janus.Interface
		pub, offer, err := rtctest.NewPublisher(opt)
		if err != nil {
			return s, err
		}
		cleanup = append(cleanup, pub.Close)
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		feed, closeJ, err := JanusPublish(dctx, j.URL, pub, offer)
		if err != nil {
			return s, fmt.Errorf("janus publisher: %w (%s)", err, lastLines(j.Log(), 3))
		}
		cleanup = append(cleanup, closeJ)
		go pub.Media(mctx)
		base = LoadConfig{System: "janus", URL: j.URL, Feed: feed}
		return steps(ctx, cfg, s, srv, base, nil, end)
	}
	return s, fmt.Errorf("unknown system %q", sys)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// steps runs the subscriber counts in turn until one misses the quality
// bar or time runs out.
func steps(ctx context.Context, cfg Config, s Series, srv server, base LoadConfig, tokens func(int) ([]string, error), end time.Time) (Series, error) {
	for _, n := range cfg.Steps {
		if time.Now().Add(cfg.Window + 40*time.Second).After(end) {
			s.Note = fmt.Sprintf("stopped before %d subscribers: out of time budget", n)
			break
		}
		lc := base
		lc.N, lc.Window, lc.scenario = n, Duration(cfg.Window), s.Scenario
		if cfg.Out != "" {
			lc.Profile = filepath.Join(cfg.Out, fmt.Sprintf("%s-webrtc-%s-%s-%d-load.pprof",
				time.Now().UTC().Format("2006-01-02-150405"), s.System, s.Scenario, n))
		}
		if tokens != nil {
			ts, err := tokens(n)
			if err != nil {
				return s, err
			}
			lc.Tokens = ts
		}
		p, err := step(ctx, cfg, srv, lc)
		if err == nil && !p.OK && time.Now().Add(cfg.Window+40*time.Second).Before(end) {
			// Once more, for every system alike: a transient (a burst of
			// loss while the step's clients settle) is not the limit.
			s.Points = append(s.Points, p)
			time.Sleep(2 * time.Second)
			p, err = step(ctx, cfg, srv, lc)
			p.Retry = true
		}
		if err != nil {
			return s, err
		}
		s.Points = append(s.Points, p)
		fmt.Fprintf(cfg.Log, "  %s/%s n=%d joined=%d loss=%.2f%% p50/p95/p99=%.1f/%.1f/%.1fms lossy=%d node-p95=%s ms cpu=%.2f cores %.0f pps/core machine %.0f%% busy ok=%v\n",
			s.System, s.Scenario, n, p.Load.Joined, 100*p.Load.Loss, p.Load.LatP50, p.Load.LatP95, p.Load.LatP99, p.Load.Lossy, convene.BoundMs(p.NodeDelayP95), p.CPU, p.PPSPerCore, p.MachineBusy, p.OK)
		if !p.OK {
			break
		}
		s.MaxOK = n
		time.Sleep(2 * time.Second) // the last step's clients hang up
	}
	return s, nil
}

// step runs one load process and measures the server over its window.
func step(ctx context.Context, cfg Config, srv server, lc LoadConfig) (Point, error) {
	in, _ := json.Marshal(lc)
	cmd := exec.CommandContext(ctx, cfg.Self, "rtc-load")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Point{}, err
	}
	if err := cmd.Start(); err != nil {
		return Point{}, err
	}
	defer proc.Stop(cmd, 5*time.Second)
	sc := bufio.NewScanner(out)
	var cpu0 float64
	var m0 proc.CPU
	var t0 time.Time
	var d0 map[float64]float64
	dl, hasDelay := srv.(delayer)
	p := Point{N: lc.N}
	for sc.Scan() {
		line := sc.Text()
		if line == "window start" {
			m0, _ = proc.ReadCPU()
			_, cpu0, _ = proc.Process(srv.pid())
			if hasDelay {
				d0 = dl.delayBuckets()
			}
			t0 = time.Now()
			if pr, ok := srv.(profiler); ok && cfg.Out != "" {
				go pr.profile(int(cfg.Window.Seconds())-1, filepath.Join(cfg.Out, fmt.Sprintf("%s-webrtc-%s-%d.pprof",
					time.Now().UTC().Format("2006-01-02-150405"), lc.scenario, lc.N)))
			}
			continue
		}
		if strings.HasPrefix(line, "{") {
			_, cpu1, _ := proc.Process(srv.pid())
			if hasDelay && d0 != nil {
				p.NodeDelayP95 = convene.HistogramPct(d0, dl.delayBuckets(), 0.95)
			}
			if m1, err := proc.ReadCPU(); err == nil {
				p.MachineBusy, _ = m1.Since(m0)
			}
			if err := json.Unmarshal([]byte(line), &p.Load); err != nil {
				return p, err
			}
			if el := time.Since(t0).Seconds(); el > 0 && !t0.IsZero() {
				p.CPU = (cpu1 - cpu0) / el
			}
			break
		}
	}
	_ = cmd.Wait()
	if t0.IsZero() {
		return p, fmt.Errorf("the load process ended without measuring: %s", lastLines(stderr.String(), 5))
	}
	if p.CPU > 0 {
		p.CPUPerSub = p.CPU * 1000 / float64(lc.N)
		p.PPSPerCore = float64(p.Load.Received) / p.Load.Seconds / p.CPU
	}
	p.OK = p.Load.Joined == lc.N && p.Load.Loss < MaxLoss && p.Load.LatP95 < MaxP95ms && p.Load.Error == ""
	return p, nil
}

// conveneNode is the node a run measures, with what rtcbench asks of it.
type conveneNode struct{ *convene.Node }

// admissionLifted are the flags that lift the node's admission for the
// run: the benchmark looks for where forwarding quality breaks, not where
// the node would start refusing (the overload benchmark measures that).
// Before them, a 1,000-subscriber step failed on webrtc.max_peers, and
// one after 4,300 members had joined the session over earlier steps on
// sessions.max_members (members stay in the session when they hang up).
var admissionLifted = []string{"-capacity-pps", "1e12", "-webrtc-max-peers", "100000", "-sessions-max-members", "100000"}

func startConvene(cfg Config) (*conveneNode, error) {
	n, err := convene.Start(convene.Options{Bin: cfg.Convene, Tmp: cfg.Tmp, Pin: cfg.Pin, Args: append(append([]string{}, admissionLifted...), cfg.ServeArgs...)})
	if err != nil {
		return nil, err
	}
	return &conveneNode{n}, nil
}

func (n *conveneNode) pid() int                         { return n.PID() }
func (n *conveneNode) stop()                            { n.Stop() }
func (n *conveneNode) profile(seconds int, path string) { n.Profile(seconds, path) }

func (n *conveneNode) session() (string, error) {
	var s struct{ ID string }
	err := n.API("POST", "/api/v1/sessions", map[string]string{"name": "bench"}, &s)
	return s.ID, err
}

func (n *conveneNode) join(sid string) (string, error) {
	var j struct{ Token struct{ Token string } }
	err := n.API("POST", "/api/v1/sessions/"+sid+"/members", map[string]string{"name": "sub", "role": "participant"}, &j)
	return j.Token.Token, err
}
