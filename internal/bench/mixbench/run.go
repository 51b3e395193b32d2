package mixbench

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
)

// The session's shape, as the issue asks.
const (
	MembersPerSession  = 10
	SpeakersPerSession = 6
)

// Config is one run.
type Config struct {
	Convene string           // the server binary
	Systems []string         // "convene", "janus"
	Codecs  []string         // "g711", "opus"
	Steps   map[string][]int // session counts by codec, growing
	Warmup  time.Duration
	Window  time.Duration
	Budget  time.Duration // for the whole run, shared equally by the series
	Tmp     string
	Log     io.Writer
	// Out, when set with Profile, receives a CPU profile of Convene over
	// each step's window (<date>-mixer-<codec>-<sessions>.pprof).
	Out     string
	Profile bool
	// ServeArgs are added to `convene serve`.
	ServeArgs []string
	// Pin gives the server CPU 0 to itself and runs the load on the others.
	Pin bool
	// Nice is the servers' niceness (both alike; see proc.Nice).
	Nice int
	// Notes are added to the report (the machine's state, say).
	Notes []string
}

// Point is one step: Sessions sessions of 10 members.
type Point struct {
	Sessions int     `json:"sessions"`
	Quality  Quality `json:"quality"`
	Load     Counts  `json:"load"`
	// CPU is the server's CPU over the window, in cores.
	CPU float64 `json:"cpu_cores"`
	// CPUPerSession is in milliseconds of CPU a second.
	CPUPerSession float64 `json:"cpu_ms_per_s_per_session"`
	// PerCore is sessions per core of the server's CPU.
	PerCore float64 `json:"sessions_per_core"`
	// MachineBusy and Steal are the machine's shares over the window.
	MachineBusy float64 `json:"machine_busy_pct"`
	Steal       float64 `json:"steal_pct"`
	// LoadCPU is the benchmark process's CPU (the members), in cores.
	LoadCPU float64 `json:"load_cpu_cores"`
	// Others is the CPU, in cores, that neither the server nor the load
	// used over the window: other work on a shared machine.
	Others float64 `json:"others_cores"`
	OK     bool    `json:"ok"`
	Retry  bool    `json:"retry,omitempty"`
	// MissedTicks are the frames Convene's mixers said they could not
	// produce in time over the window (convene_mixer_missed_ticks_total);
	// -1 for a server that does not say.
	MissedTicks float64 `json:"missed_ticks"`
}

// Series is one server with one codec.
type Series struct {
	System  string  `json:"system"`
	Version string  `json:"version"`
	Codec   string  `json:"codec"`
	Points  []Point `json:"points"`
	// MaxOK is the most sessions at the bar, PerCore its sessions per core.
	MaxOK   int     `json:"max_ok"`
	PerCore float64 `json:"sessions_per_core_at_max"`
	Note    string  `json:"note,omitempty"`
}

// Result is a whole run.
type Result struct {
	results.Run
	Series []Series `json:"series"`
	Notes  []string `json:"notes,omitempty"`
}

// memberBase is the first member address; the run's members follow it.
var memberBase = netip.MustParseAddr("127.88.0.1")

// Run measures every codec with every system.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Run: results.NewRun(cfg.Warmup, cfg.Window, cfg.Nice)}
	if cfg.Pin {
		if err := proc.PinSelf(); err != nil {
			return res, err
		}
		res.Pinned = true
	}
	res.Notes = append(res.Notes, fmt.Sprintf("`convene serve` ran with `%s`: the admission limits lifted (mixer.max, a count of mixers, 200 by default; mixer.cores, the mixers' measured load, 0.8 of the node's CPUs by default), so that frames on time decide, as for AudioBridge, which has no such limit",
		strings.Join(conveneArgs(cfg), " ")),
		"AudioBridge: rooms at 8000 Hz (G.711) or 48000 Hz (Opus), plain RTP participants with codec pcmu or opus; Opus participants with Convene's encoder settings (32 kbit/s, complexity 5, in-band FEC for 5% loss)")
	res.Notes = append(res.Notes, cfg.Notes...)
	share := cfg.Budget / time.Duration(max(1, len(cfg.Codecs)*len(cfg.Systems)))
	for _, name := range cfg.Codecs {
		c, ok := Codecs[name]
		if !ok {
			return res, fmt.Errorf("unknown codec %q (g711, opus)", name)
		}
		for _, sys := range cfg.Systems {
			s, err := runSeries(ctx, cfg, sys, c, time.Now().Add(share))
			if err != nil {
				s.Note = err.Error()
				fmt.Fprintf(cfg.Log, "  %s/%s: %v\n", sys, name, err)
			}
			res.Series = append(res.Series, s)
		}
	}
	return res, nil
}

func runSeries(ctx context.Context, cfg Config, sys string, c Codec, end time.Time) (Series, error) {
	s := Series{System: sys, Codec: c.Name}
	var srv server
	var err error
	switch sys {
	case "convene":
		srv, err = startConveneMixer(cfg, c)
	case "janus":
		srv, err = startJanusMixer(ctx, cfg, c)
	default:
		return s, fmt.Errorf("unknown system %q", sys)
	}
	if err != nil {
		return s, err
	}
	defer srv.stop()
	s.Version = srv.version()
	load, err := NewLoad(memberBase, 4)
	if err != nil {
		return s, err
	}
	defer load.Close()
	voices := make([]speech, SpeakersPerSession)
	for i := range voices {
		// Six tones a little apart, 300 to 800 Hz, one per speaker.
		if voices[i], err = record(c, float64(300+100*i)); err != nil {
			return s, err
		}
	}
	var members []*Member
	for _, n := range cfg.Steps[c.Name] {
		if time.Now().Add(cfg.Warmup + cfg.Window + 30*time.Second).After(end) {
			s.Note = fmt.Sprintf("stopped before %d sessions: out of time budget", n)
			break
		}
		t0, from := time.Now(), len(members)/MembersPerSession
		for id := from; id < n; id++ {
			for k := range MembersPerSession {
				i := id*MembersPerSession + k
				members = append(members, load.NewMember(i, id, k < SpeakersPerSession, voices[k%SpeakersPerSession], c.Spec.PT))
			}
		}
		if err := addSessions(ctx, srv, members, from, n); err != nil {
			return s, err
		}
		fmt.Fprintf(cfg.Log, "  %s/%s: %d sessions set up in %v\n", sys, c.Name, n-from, time.Since(t0).Round(time.Millisecond))
		tries := results.Tries(func(retry bool) Point {
			if retry {
				time.Sleep(time.Second)
			}
			p := step(ctx, cfg, srv, load, members, c, n)
			p.Retry = retry
			return p
		}, func(p Point) bool { return p.OK }, func(p Point) float64 { return p.Others },
			func() bool { return time.Now().Add(cfg.Warmup + cfg.Window + 30*time.Second).Before(end) })
		for _, p := range tries {
			s.Points = append(s.Points, p)
			logPoint(cfg.Log, s, p)
		}
		p := tries[len(tries)-1]
		if !p.OK {
			break
		}
		s.MaxOK, s.PerCore = n, p.PerCore
	}
	return s, nil
}

// addSessions sets up sessions from..to-1 on the server, a few at a time.
func addSessions(ctx context.Context, srv server, members []*Member, from, to int) error {
	ids := make(chan int)
	errs := make(chan error, setupWorkers)
	for range setupWorkers {
		go func() {
			var err error
			for id := range ids {
				if err == nil {
					if err = srv.addSession(ctx, id, members[id*MembersPerSession:(id+1)*MembersPerSession]); err != nil {
						err = fmt.Errorf("session %d: %w", id, err)
					}
				}
			}
			errs <- err
		}()
	}
	for id := from; id < to; id++ {
		ids <- id
	}
	close(ids)
	var first error
	for range setupWorkers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

const setupWorkers = 4

func logPoint(w io.Writer, s Series, p Point) {
	q := p.Quality
	fmt.Fprintf(w, "  %s/%s sessions=%d received=%.3f%% late=%.3f%% starved=%d jitter=%.2f/%.2fms late-max=%.1fms cpu=%.3f cores %.2f ms/s per session %.0f sessions/core load %.2f cores machine %.0f%% others %.2f cores steal %.0f%% missed-ticks=%.0f ok=%v\n",
		s.System, s.Codec, p.Sessions, 100*q.ReceivedShare(), 100*q.LateShare(), q.Starved, q.JitterMean, q.JitterMax, q.LateMax,
		p.CPU, p.CPUPerSession, p.PerCore, p.LoadCPU, p.MachineBusy, p.Others, p.Steal, p.MissedTicks, p.OK)
}

// step plays the members once and measures the server over the window.
func step(ctx context.Context, cfg Config, srv server, load *Load, ms []*Member, c Codec, n int) Point {
	p := Point{Sessions: n}
	type sample struct {
		cpu, self float64
		m         proc.CPU
		at        time.Time
	}
	var a, b sample
	cm, isConvene := srv.(*conveneMixer)
	var missed0 float64
	p.MissedTicks = -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(cfg.Warmup):
		case <-ctx.Done():
			return
		}
		if isConvene {
			missed0 = cm.missedTicks()
		}
		_, a.cpu, _ = proc.Process(srv.pid())
		_, a.self, _ = proc.Process(os.Getpid())
		a.m, _ = proc.ReadCPU()
		a.at = time.Now()
		if isConvene && cfg.Profile && cfg.Out != "" {
			go cm.n.Profile(int(cfg.Window.Seconds())-1, filepath.Join(cfg.Out, fmt.Sprintf("%s-mixer-%s-%d.pprof",
				time.Now().UTC().Format("2006-01-02-150405"), c.Name, n)))
		}
		select {
		case <-time.After(cfg.Window):
		case <-ctx.Done():
			return
		}
		_, b.cpu, _ = proc.Process(srv.pid())
		_, b.self, _ = proc.Process(os.Getpid())
		b.m, _ = proc.ReadCPU()
		b.at = time.Now()
		if isConvene && missed0 >= 0 {
			if m1 := cm.missedTicks(); m1 >= 0 {
				p.MissedTicks = m1 - missed0
			}
		}
	}()
	rs, counts := load.Run(ctx, ms, c.Spec.Rate, cfg.Warmup, cfg.Window)
	<-done
	p.Load = counts
	p.Quality = quality(rs, cfg.Window)
	if el := b.at.Sub(a.at).Seconds(); el > 0 && !a.at.IsZero() {
		p.CPU = (b.cpu - a.cpu) / el
		p.MachineBusy, p.Steal = b.m.Since(a.m)
		p.LoadCPU = (b.self - a.self) / el
		p.Others = max(0, p.MachineBusy/100*float64(runtime.NumCPU())-p.CPU-p.LoadCPU)
	}
	if p.CPU > 0 {
		p.CPUPerSession = p.CPU * 1000 / float64(n)
		p.PerCore = float64(n) / p.CPU
	}
	p.OK = p.Quality.Pass()
	return p
}
