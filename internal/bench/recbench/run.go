package recbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
	"github.com/convene/convene/internal/bench/rtcbench"
)

// LateAfter is when a listener's packet is late, in ms after it was sent:
// rtcbench's latency bar.
const LateAfter = rtcbench.MaxP95ms

// MaxListenerLoss is the share of packets the listeners may lose together:
// rtcbench's bar. The recordings may lose none.
const MaxListenerLoss = rtcbench.MaxLoss

// loadGOGC is the load's GOGC during a run: a heap of ~50 MB at 200
// streams collects every few seconds at 100, five times less often here.
const loadGOGC = 400

// Config is one run.
type Config struct {
	Convene string           // the server binary
	Systems []string         // "convene", "janus"
	Shapes  []string         // "128k", "5M"
	Steps   map[string][]int // stream counts by shape, growing
	PerRoom map[string]int   // streams in a room, by shape
	Warmup  time.Duration    // after a step's rooms are up, before its window
	Window  time.Duration    // each step's measuring window
	Grace   time.Duration    // how long after the window the recordings may take to hold it
	// JanusReadBuffer, when not 0, is net.core.rmem_default while a Janus
	// series runs (bytes; needs root).
	JanusReadBuffer int
	Budget          time.Duration // the whole run, shared equally by the series
	Tmp             string        // scratch: the servers' data and recordings
	Log             io.Writer
	// Out, with Profile, receives a CPU profile of Convene over each
	// step's window (<date>-recorder-<shape>-<streams>.pprof).
	Out     string
	Profile bool
	// ServeArgs are added to `convene serve`.
	ServeArgs []string
	// Pin gives each server CPU 0 to itself and runs the load on the others.
	Pin bool
	// Nice is the servers' niceness (both alike; see proc.Nice).
	Nice int
	// Workers is the load's sending goroutines (0: one per CPU).
	Workers int
	Notes   []string
}

// Point is one step: Streams streams recorded at once.
type Point struct {
	Streams int `json:"streams"`
	Rooms   int `json:"rooms"`
	// Sent is the packets the load sent over the window, Nominal its
	// mean rate times the window (a window holds more or fewer keyframes
	// than the mean). Failed is the packets the publishers' connections
	// refused, Skipped the frames the load was too late to send: either
	// makes the step the load's limit, not the server's.
	Sent    uint64  `json:"sent"`
	Nominal float64 `json:"nominal"`
	Failed  uint64  `json:"send_failed,omitempty"`
	Skipped uint64  `json:"frames_skipped,omitempty"`
	// Missing is the packets sent over the window that no recording
	// holds; MissingStreams the streams they belong to.
	Missing        uint64 `json:"recorded_missing"`
	MissingStreams int    `json:"recorded_missing_streams"`
	// Drops is what the server itself counted as not recorded over the
	// window (Convene's convene_recorder_dropped_packets_total), and
	// ForwardDrops as not forwarded to a listener
	// (convene_webrtc_dropped_packets_total); -1 when it does not say.
	Drops        float64 `json:"server_drops"`
	ForwardDrops float64 `json:"server_forward_drops"`
	// ServerUDPDrops and LoadUDPDrops are the datagrams the kernel
	// dropped over the window at the server's sockets and at the load's
	// (receive buffers full): a server that did not read in time, or a
	// load that did not.
	ServerUDPDrops uint64 `json:"server_udp_drops"`
	LoadUDPDrops   uint64 `json:"load_udp_drops"`
	Live           Live   `json:"live"`
	// NodeDelayP99 is the 99th percentile of the server's own forwarding
	// delay to the listeners over the window, ms, as the upper bound of
	// its histogram's bucket (Convene's convene_webrtc_forward_delay_seconds);
	// 0 when the server does not say.
	NodeDelayP99 float64 `json:"node_delay_p99_ms,omitempty"`
	// SendLagMax is how late, at worst, the load sent a frame against its
	// schedule, ms.
	SendLagMax float64 `json:"send_lag_max_ms"`
	// CPU is the server's CPU over the window, in cores; PerCore the
	// streams per core of it.
	CPU         float64 `json:"cpu_cores"`
	PerCore     float64 `json:"streams_per_core"`
	LoadCPU     float64 `json:"load_cpu_cores"`
	MachineBusy float64 `json:"machine_busy_pct"`
	Steal       float64 `json:"steal_pct"`
	Others      float64 `json:"others_cores"`
	OK          bool    `json:"ok"`
	// Why says what missed the bar.
	Why   string `json:"why,omitempty"`
	Retry bool   `json:"retry,omitempty"`
}

// Series is one server with one shape of stream.
type Series struct {
	System  string  `json:"system"`
	Version string  `json:"version"`
	Shape   string  `json:"shape"`
	PerRoom int     `json:"streams_per_room"`
	Points  []Point `json:"points"`
	// MaxOK is the most streams at the bar, PerCore its streams per core.
	MaxOK   int     `json:"max_ok"`
	PerCore float64 `json:"streams_per_core_at_max"`
	Note    string  `json:"note,omitempty"`
}

// Result is a whole run.
type Result struct {
	results.Run
	Series []Series `json:"series"`
	Notes  []string `json:"notes,omitempty"`
}

// Run measures every shape with every system.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Run: results.NewRun(cfg.Warmup, cfg.Window, cfg.Nice)}
	if cfg.Pin {
		if err := proc.PinSelf(); err != nil {
			return res, err
		}
		res.Pinned = true
	}
	// The load is the instrument: its garbage collector's mark phases
	// (tens of ms on the one CPU it has on a small machine) must stall
	// the publishers and listeners as seldom as memory allows.
	defer debug.SetGCPercent(debug.SetGCPercent(loadGOGC))
	if cfg.Nice != 0 {
		// The load is the instrument: other work on a shared machine must
		// not stall it any more than the servers.
		if err := proc.NiceSelf(cfg.Nice); err != nil {
			return res, err
		}
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("`convene serve` ran with `%s`: the admission limits lifted (the disk capacity probed at start-up, against which each recording reserves 128 kb/s per audio and 2.5 Mb/s per video track; the node's delivery capacity, against which joins are admitted; the cap of 1,000 peer connections, webrtc.max_peers), so that the packets recorded decide, as for Janus, which has no such limit",
			strings.Join(conveneArgs(cfg, "DIR"), " ")),
		"Janus: VideoRoom rooms created with record=true and rec_dir, audiocodec opus, videocodec vp8, bitrate 0 (no REMB cap), fir_freq 0; every publisher and listener handle on one Janus session over its HTTP transport",
		"Convene syncs its recordings' file system (one syncfs shared by every recording) every 2 s; Janus leaves its .mjr files to stdio's buffer and the page cache",
		"Socket receive buffers: Convene asks for 32 MiB on its one WebRTC port, shared by every connection (past net.core.rmem_max where it may, SO_RCVBUFFORCE: here, as root); Janus takes the system's default on each connection's port (net.core.rmem_default); "+
			"this machine: rmem_default "+sysctl("net/core/rmem_default")+", rmem_max "+sysctl("net/core/rmem_max")+" bytes. The listeners' sockets get 4 MiB")
	res.Notes = append(res.Notes, cfg.Notes...)
	share := cfg.Budget / time.Duration(max(1, len(cfg.Shapes)*len(cfg.Systems)))
	for _, name := range cfg.Shapes {
		sh, ok := Shapes[name]
		if !ok {
			return res, fmt.Errorf("unknown rate %q (128k, 5M)", name)
		}
		for _, sys := range cfg.Systems {
			restore := func() {}
			if sys == "janus" && cfg.JanusReadBuffer > 0 {
				restore = raiseDefaultReadBuffer(cfg.JanusReadBuffer, &res)
			}
			s, err := runSeries(ctx, cfg, sys, sh, time.Now().Add(share))
			restore()
			if err != nil {
				s.Note = err.Error()
				fmt.Fprintf(cfg.Log, "  %s/%s: %v\n", sys, name, err)
			}
			res.Series = append(res.Series, s)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
		}
	}
	return res, nil
}

// series is the state of one series: its server, the streams and
// listeners so far, the load and the recordings' files.
type series struct {
	cfg       Config
	srv       server
	shape     Shape
	perRoom   int
	streams   []*stream
	listeners listeners
	pump      *pump
	files     *files
}

func (s *series) close() {
	if s.pump != nil {
		s.pump.close()
	}
	for _, st := range s.streams {
		if st.close != nil {
			st.close()
		}
	}
	for _, l := range s.listeners {
		l.Close()
	}
	if s.srv != nil {
		s.srv.stop()
		os.RemoveAll(s.srv.recordings()) // gigabytes, soon
	}
}

func runSeries(ctx context.Context, cfg Config, sys string, sh Shape, end time.Time) (Series, error) {
	out := Series{System: sys, Shape: sh.Name, PerRoom: max(1, cfg.PerRoom[sh.Name])}
	s := &series{cfg: cfg, shape: sh, perRoom: out.PerRoom}
	defer s.close()
	dir := filepath.Join(cfg.Tmp, sys+"-"+sh.Name+"-recordings")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, err
	}
	// srv is set only once a server started: a typed nil in the interface
	// would have close stop nothing and panic.
	var err error
	switch sys {
	case "convene":
		var c *conveneRecorder
		if c, err = startConvene(cfg, dir); err == nil {
			s.srv = c
		}
	case "janus":
		var j *janusRecorder
		if j, err = startJanus(ctx, cfg, sh.Name, dir); err == nil {
			s.srv = j
		}
	case PlainSystem:
		var p *plainRecorder
		if p, err = startPlain(cfg, dir); err == nil {
			s.srv = p
		}
	default:
		return out, fmt.Errorf("unknown system %q", sys)
	}
	if err != nil {
		return out, err
	}
	out.Version = s.srv.version()
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	s.pump = newPump(workers)
	s.files = newFiles(dir)
	for _, n := range cfg.Steps[sh.Name] {
		if time.Now().Add(cfg.Warmup + cfg.Window + cfg.Grace + 30*time.Second).After(end) {
			out.Note = fmt.Sprintf("stopped before %d streams: out of time budget", n)
			break
		}
		t0, from := time.Now(), len(s.streams)
		if err := s.grow(ctx, n); err != nil {
			return out, fmt.Errorf("setting up %d streams: %w", n, err)
		}
		fmt.Fprintf(cfg.Log, "  %s/%s: %d streams in %d rooms set up in %v\n", sys, sh.Name, n-from, len(s.listeners), time.Since(t0).Round(time.Millisecond))
		tries := results.Tries(func(retry bool) Point {
			p := s.step(ctx)
			p.Retry = retry
			return p
		}, func(p Point) bool { return p.OK || ctx.Err() != nil }, func(p Point) float64 { return p.Others },
			func() bool { return time.Now().Add(cfg.Warmup + cfg.Window + cfg.Grace + 30*time.Second).Before(end) })
		for _, p := range tries {
			out.Points = append(out.Points, p)
			logPoint(cfg.Log, out, p)
		}
		p := tries[len(tries)-1]
		if !p.OK || ctx.Err() != nil {
			break
		}
		out.MaxOK, out.PerCore = n, p.PerCore
	}
	return out, nil
}

const setupWorkers = 4

// grow adds rooms until there are n streams (the last room may be short).
func (s *series) grow(ctx context.Context, n int) error {
	type room struct {
		id int
		ss []*stream
	}
	var rooms []room
	for len(s.streams) < n {
		r := room{id: len(s.listeners) + len(rooms)}
		for k := 0; k < s.perRoom && len(s.streams) < n; k++ {
			st := newStream(uint32(len(s.streams)), &s.shape, nil)
			s.streams = append(s.streams, st)
			r.ss = append(r.ss, st)
		}
		rooms = append(rooms, r)
	}
	ls := make([]liveListener, len(rooms))
	ids := make(chan int)
	errs := make(chan error, setupWorkers)
	for range setupWorkers {
		go func() {
			var err error
			for i := range ids {
				if err != nil {
					continue
				}
				sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				ls[i], err = s.srv.addRoom(sctx, rooms[i].id, rooms[i].ss)
				cancel()
				if err != nil {
					err = fmt.Errorf("room %d: %w", rooms[i].id, err)
					continue
				}
				for _, st := range rooms[i].ss {
					s.pump.add(st)
				}
			}
			errs <- err
		}()
	}
	for i := range rooms {
		ids <- i
	}
	close(ids)
	var first error
	for range setupWorkers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for _, l := range ls {
		if l != nil {
			s.listeners = append(s.listeners, l)
		}
	}
	if first != nil {
		return first
	}
	// Every listener hears every stream of its room.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := waitTracks(wctx, l, len(rooms[i].ss)); err != nil {
				mu.Lock()
				first = fmt.Errorf("room %d: %w", rooms[i].id, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

func logPoint(w io.Writer, s Series, p Point) {
	fmt.Fprintf(w, "  %s/%s streams=%d sent=%.2f%% (skipped %d frames, %d failed) recorded-missing=%d (%d streams) drops=%.0f/%.0f kernel-drops=%d/%d live: loss=%.3f%% late=%d p50/p99/max=%.0f/%.0f/%.0fms (read: late=%d p99=%.0fms) node-p99=%s ms lag=%.0fms cpu=%.3f cores %.0f streams/core load %.2f cores machine %.0f%% others %.2f ok=%v %s\n",
		s.System, s.Shape, p.Streams, 100*float64(p.Sent)/max(1, p.Nominal), p.Skipped, p.Failed, p.Missing, p.MissingStreams, p.Drops, p.ForwardDrops, p.ServerUDPDrops, p.LoadUDPDrops, 100*p.Live.Loss, p.Live.Late,
		p.Live.LatP50, p.Live.LatP99, p.Live.LatMax, p.Live.ReadLate, p.Live.ReadP99, convene.BoundMs(p.NodeDelayP99), p.SendLagMax, p.CPU, p.PerCore, p.LoadCPU, p.MachineBusy, p.Others, p.OK, p.Why)
}

// step measures the server over a window after the warm-up: the
// listeners, the server's CPU, then the recordings' hold of the window.
func (s *series) step(ctx context.Context) Point {
	cfg := s.cfg
	p := Point{Streams: len(s.streams), Rooms: len(s.listeners), Drops: -1, ForwardDrops: -1}
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
		p.Why = "interrupted"
		return p
	}
	type sample struct {
		cpu, self, drops, fwd float64
		udpSrv, udpLoad       uint64
		m                     proc.CPU
		at                    time.Time
		live                  listen
		delay                 map[float64]float64
	}
	take := func() sample {
		var a sample
		a.drops, a.fwd = s.srv.drops()
		a.udpSrv, _ = proc.UDPDrops(s.srv.pid())
		a.udpLoad, _ = proc.UDPDrops(os.Getpid())
		a.delay = s.srv.delay()
		_, a.cpu, _ = proc.Process(s.srv.pid())
		_, a.self, _ = proc.Process(os.Getpid())
		a.m, _ = proc.ReadCPU()
		a.live = s.listeners.snapshot()
		a.at = time.Now()
		return a
	}
	n0 := make([]uint32, len(s.streams))
	var failed0 uint64
	for i, st := range s.streams {
		n0[i] = st.next.Load()
		failed0 += st.failed.Load()
	}
	skipped0 := s.pump.skipped.Load()
	s.pump.resetLag()
	a := take()
	if cv, ok := s.srv.(*conveneRecorder); ok && cfg.Profile && cfg.Out != "" {
		go cv.n.Profile(int(cfg.Window.Seconds())-1, filepath.Join(cfg.Out, fmt.Sprintf("%s-recorder-%s-%d.pprof",
			time.Now().UTC().Format("2006-01-02-150405"), s.shape.Name, len(s.streams))))
	}
	stopLoadProfile := profileLoad(cfg, s.shape.Name, len(s.streams))
	select {
	case <-time.After(cfg.Window):
	case <-ctx.Done():
		stopLoadProfile()
		p.Why = "interrupted"
		return p
	}
	stopLoadProfile()
	b := take()
	ws := make(windows, len(s.streams))
	for i, st := range s.streams {
		ws[i] = newWindow(n0[i], st.next.Load())
		p.Failed += st.failed.Load()
	}
	p.Failed -= failed0
	p.Skipped = s.pump.skipped.Load() - skipped0
	p.SendLagMax = float64(s.pump.resetLag()) / 1e6
	el := b.at.Sub(a.at).Seconds()
	p.Sent = ws.sent()
	p.Nominal = float64(len(s.streams)) * s.shape.PacketsPerSecond() * el
	p.Live = b.live.since(a.live)
	if a.delay != nil && b.delay != nil {
		p.NodeDelayP99 = convene.HistogramPct(a.delay, b.delay, 0.99)
	}
	if a.drops >= 0 && b.drops >= 0 {
		p.Drops = b.drops - a.drops
	}
	if a.fwd >= 0 && b.fwd >= 0 {
		p.ForwardDrops = b.fwd - a.fwd
	}
	if b.udpSrv >= a.udpSrv { // a socket closed meanwhile takes its count with it
		p.ServerUDPDrops = b.udpSrv - a.udpSrv
	}
	if b.udpLoad >= a.udpLoad {
		p.LoadUDPDrops = b.udpLoad - a.udpLoad
	}
	if el > 0 {
		p.CPU = (b.cpu - a.cpu) / el
		p.MachineBusy, p.Steal = b.m.Since(a.m)
		p.LoadCPU = (b.self - a.self) / el
		p.Others = max(0, p.MachineBusy/100*float64(runtime.NumCPU())-p.CPU-p.LoadCPU)
	}
	if p.CPU > 0 {
		p.PerCore = float64(len(s.streams)) / p.CPU
	}
	// The recordings: read what the servers wrote until every packet of
	// the window is there or the grace is over (a writer that flushes
	// every 200 ms, or through stdio's buffer, is behind by that much).
	// The last read starts after the grace: a read of files no longer in
	// the page cache takes seconds, and one that started early read some
	// files before their writer had flushed the window's end.
	deadline := time.Now().Add(cfg.Grace)
	for {
		started := time.Now()
		s.files.scan(ws.mark)
		p.Missing, p.MissingStreams = ws.missing()
		if p.Missing == 0 || started.After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(min(500*time.Millisecond, max(time.Until(deadline), time.Millisecond)))
	}
	p.OK, p.Why = judge(p)
	if s.files.Bad > 0 {
		p.Why += fmt.Sprintf("; %d recording files unreadable (%v)", s.files.Bad, s.files.BadErr)
		s.files.Bad = 0
	}
	return p
}

// judge holds a point to the bar and says what it missed.
func judge(p Point) (bool, string) {
	ok, why := true, ""
	if p.Skipped > 0 || p.Failed > 0 {
		ok = false
		why += fmt.Sprintf("the load skipped %d frames and could not send %d packets: its limit, not the server's; ", p.Skipped, p.Failed)
	}
	if p.Sent == 0 {
		ok = false
		why += "nothing sent; "
	}
	if p.Missing > 0 {
		ok = false
		why += fmt.Sprintf("%d packets of %d streams not recorded; ", p.Missing, p.MissingStreams)
	}
	if p.Live.Late > 0 {
		ok = false
		why += fmt.Sprintf("%d live packets later than %d ms; ", p.Live.Late, LateAfter)
	}
	if p.Live.Loss >= MaxListenerLoss {
		ok = false
		why += fmt.Sprintf("listeners lost %.2f%%; ", 100*p.Live.Loss)
	}
	if !ok && p.LoadUDPDrops > 0 {
		why += fmt.Sprintf("the load's own sockets dropped %d datagrams; ", p.LoadUDPDrops)
	}
	if p.Live.Received == 0 {
		ok = false
		why += "the listeners received nothing; "
	}
	return ok, strings.TrimSuffix(why, "; ")
}

// sysctl reads /proc/sys/<name>, or says it could not.
// raiseDefaultReadBuffer sets net.core.rmem_default to n bytes for a
// Janus series (its sockets take the system's default, Convene asks for
// its own) and returns what puts the old value back; a run that cannot
// (not root) says so in the report.
func raiseDefaultReadBuffer(n int, res *Result) func() {
	const path = "/proc/sys/net/core/rmem_default"
	old, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644)
	}
	if err != nil {
		res.addNote(fmt.Sprintf("Janus ran with the system's default socket receive buffer: raising net.core.rmem_default to %d failed (%v)", n, err))
		return func() {}
	}
	res.addNote(fmt.Sprintf("While Janus ran, net.core.rmem_default was %d bytes (put back to %s after), so that its sockets' receive buffers are not what limits it: each holds seconds of its one stream, where Convene's one port (32 MiB) holds about 0.2 s of 100 video streams; the machine's settings are given above", n, strings.TrimSpace(string(old))))
	return func() { _ = os.WriteFile(path, old, 0o644) }
}

// addNote adds a note once.
func (r *Result) addNote(n string) {
	for _, x := range r.Notes {
		if x == n {
			return
		}
	}
	r.Notes = append(r.Notes, n)
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// profileLoad saves, with Profile, a CPU profile of this process (the
// publishers and listeners) over a step's window beside the server's
// (<date>-recorder-<shape>-<streams>-load.pprof): where the load's core
// goes when the load, not the server, is the limit. It returns the stop.
func profileLoad(cfg Config, shape string, streams int) func() {
	if !cfg.Profile || cfg.Out == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(cfg.Out, fmt.Sprintf("%s-recorder-%s-%d-load.pprof",
		time.Now().UTC().Format("2006-01-02-150405"), shape, streams)))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
