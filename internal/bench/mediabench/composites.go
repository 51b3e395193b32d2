package mediabench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
)

// The composite the issue asks for: 2×2, 360p, 15 fps (VP8, the node's
// default codec).
const (
	compositeWidth  = 640
	compositeHeight = 360
	compositeFPS    = 15
	compositeCams   = 4
)

// CompositePoint is one step: Composites running together.
type CompositePoint struct {
	Composites int    `json:"composites"`
	Frames     Frames `json:"frames"`
	Usage
	// CPUPer is the system's CPU per composite, in cores.
	CPUPer float64 `json:"cpu_cores_per_composite"`
	OK     bool    `json:"ok"`
	Retry  bool    `json:"retry,omitempty"`
}

// CompositeSeries is one system's composites, step by step.
type CompositeSeries struct {
	System  string           `json:"system"`
	Version string           `json:"version"`
	Points  []CompositePoint `json:"points"`
	// MaxOK is the most composites at the bar; CPUPer its CPU per
	// composite there.
	MaxOK  int     `json:"max_ok"`
	CPUPer float64 `json:"cpu_cores_per_composite_at_max"`
	// Ended says why the series stopped (EndedMiss …).
	Ended string `json:"ended"`
	Note  string `json:"note,omitempty"`
}

// compositeRig is what a series grows: one more composite at a time, its
// frames read by a frameReader each.
type compositeRig interface {
	add(ctx context.Context) (*frameReader, error)
	// ready waits until every composite added shows its cameras.
	ready(ctx context.Context) error
	cpu() float64
	version() string
	stop()
}

func runComposites(ctx context.Context, cfg Config, rec *Recording, end time.Time) []CompositeSeries {
	systems := []string{"convene"}
	if cfg.Peers {
		systems = append(systems, "ffmpeg")
	}
	var out []CompositeSeries
	// Each system the same time, whatever the one before it left over.
	share := time.Until(end) / time.Duration(len(systems))
	for _, sys := range systems {
		s := compositeSeries(ctx, cfg, rec, sys, time.Now().Add(share))
		if s.Note != "" {
			fmt.Fprintf(cfg.Log, "  composites/%s: %s\n", sys, s.Note)
		}
		out = append(out, s)
	}
	return out
}

func compositeSeries(ctx context.Context, cfg Config, rec *Recording, sys string, end time.Time) CompositeSeries {
	s := CompositeSeries{System: sys, Ended: EndedSteps}
	defer func() {
		if s.Note != "" && s.Ended == EndedSteps {
			s.Ended = EndedError
		}
	}()
	player := NewPlayer(rec, nil)
	defer player.Stop()
	var rig compositeRig
	switch sys {
	case "convene":
		n, err := startNode(cfg)
		if err != nil {
			s.Note = err.Error()
			return s
		}
		rig = &conveneComposites{n: n, player: player}
	case "ffmpeg":
		rig = &ffmpegComposites{cfg: cfg, player: player}
	}
	defer rig.stop()
	s.Version = rig.version()
	var readers []*frameReader
	defer func() {
		for _, r := range readers {
			r.stop()
		}
	}()
	for _, n := range cfg.CompositeSteps {
		if !timeFor(cfg, end, 3*time.Second) {
			s.Note = fmt.Sprintf("stopped before %d composites: out of time budget", n)
			s.Ended = EndedBudget
			break
		}
		t0 := time.Now()
		for len(readers) < n {
			r, err := rig.add(ctx)
			if r != nil {
				readers = append(readers, r)
			}
			if err != nil {
				s.Note = fmt.Sprintf("composite %d: %v", len(readers)+1, err)
				return s
			}
		}
		if err := rig.ready(ctx); err != nil {
			s.Note = fmt.Sprintf("%d composites: %v", n, err)
			return s
		}
		fmt.Fprintf(cfg.Log, "  composites/%s: %d running after %v\n", sys, n, time.Since(t0).Round(time.Millisecond))
		if !sleep(ctx, cfg.Warmup) {
			return s
		}
		tries := results.Tries(func(retry bool) CompositePoint {
			p := CompositePoint{Composites: n, Retry: retry}
			for _, r := range readers {
				r.open()
			}
			a := sample(rig.cpu)
			sleep(ctx, cfg.Window)
			b := sample(rig.cpu)
			clocks := make([]FrameClock, len(readers))
			for i, r := range readers {
				clocks[i] = r.close()
			}
			p.Usage = b.since(a)
			p.Frames = SumFrames(clocks, b.at.Sub(a.at), compositeFPS)
			p.CPUPer = p.CPU / float64(n)
			p.OK = p.Frames.Pass()
			return p
		}, func(p CompositePoint) bool { return p.OK }, func(p CompositePoint) float64 { return p.Others },
			func() bool { return ctx.Err() == nil && timeFor(cfg, end, 5*time.Second) })
		for _, p := range tries {
			s.Points = append(s.Points, p)
			f := p.Frames
			fmt.Fprintf(cfg.Log, "  composites/%s n=%d received=%.2f%% late=%.2f%% starved=%d late-max=%.0fms cpu=%.2f cores (%.3f each) load %.2f machine %.0f%% others %.2f ok=%v\n",
				sys, n, 100*f.ReceivedShare(), 100*f.LateShare(), f.Starved, f.LateMax, p.CPU, p.CPUPer, p.LoadCPU, p.MachineBusy, p.Others, p.OK)
		}
		p := tries[len(tries)-1]
		if !p.OK {
			s.Ended = EndedMiss
			break
		}
		s.MaxOK, s.CPUPer = n, p.CPUPer
	}
	return s
}

// conveneComposites are the node's: a session of four cameras each, with
// the chair's 2×2 composite, read back through a receive-only video link.
type conveneComposites struct {
	n      *convene.Node
	player *Player
	ids    []struct{ session, composite string }
}

func (c *conveneComposites) add(ctx context.Context) (*frameReader, error) {
	cs, err := newCameraSession(c.n, c.player, fmt.Sprintf("composite-%d", len(c.ids)+1), compositeCams)
	if err != nil {
		return nil, err
	}
	ignore := map[uint32]bool{}
	for _, cam := range cs.cams {
		ignore[cam.SSRC()] = true
	}
	r, err := newFrameReader(ignore)
	if err != nil {
		return nil, err
	}
	if err := c.n.API("POST", "/api/v1/sessions/"+cs.id+"/rtp-links", map[string]any{"remote": r.addr(), "kind": "video",
		"direction": "recvonly"}, nil); err != nil {
		return r, err
	}
	var comp struct {
		ID string `json:"id"`
	}
	// The cameras are heard once they have sent (within 2 s): a
	// composite asked for at once would start with fewer cells shown and
	// restart as each appears; the bench waits for them as a chair would.
	time.Sleep(300 * time.Millisecond)
	if err := c.n.API("POST", "/api/v1/sessions/"+cs.id+"/composites", map[string]any{"layout": composite.Grid2,
		"width": compositeWidth, "height": compositeHeight, "fps": compositeFPS, "codec": composite.VP8}, &comp); err != nil {
		return r, err
	}
	c.ids = append(c.ids, struct{ session, composite string }{cs.id, comp.ID})
	return r, nil
}

func (c *conveneComposites) ready(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range c.ids {
		for {
			var l struct {
				Composites []struct {
					ID      string   `json:"id"`
					Showing []string `json:"showing"`
					Frames  uint64   `json:"frames"`
				} `json:"composites"`
			}
			if err := c.n.API("GET", "/api/v1/sessions/"+id.session+"/composites", nil, &l); err != nil {
				return err
			}
			shown := 0
			var frames uint64
			for _, g := range l.Composites {
				if g.ID == id.composite {
					frames = g.Frames
					for _, t := range g.Showing {
						if t != "" {
							shown++
						}
					}
				}
			}
			if shown == compositeCams && frames > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("composite %s shows %d of %d cameras, %d frames, after 30 s", id.composite, shown, compositeCams, frames)
			}
			if !sleep(ctx, 250*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	return nil
}

func (c *conveneComposites) cpu() float64    { return proc.TreeCPU(c.n.PID()) }
func (c *conveneComposites) version() string { return c.n.Version }
func (c *conveneComposites) stop()           { c.n.Stop() }

// ffmpegComposites are plain ffmpeg's: one ffmpeg each, its four inputs
// sent straight to it by four cameras, doing the node's own filter graph
// (composite.Graph: the cells scaled and padded, the names drawn, xstack)
// and encoding with the node's settings, its RTP to a frameReader.
type ffmpegComposites struct {
	cfg     Config
	player  *Player
	mu      sync.Mutex
	cmds    []*exec.Cmd
	readers []*frameReader
}

func (f *ffmpegComposites) add(ctx context.Context) (*frameReader, error) {
	dir, err := os.MkdirTemp(f.cfg.Tmp, "ffmpeg-composite-")
	if err != nil {
		return nil, err
	}
	ports, err := ffmpeg.FreePorts(compositeCams)
	if err != nil {
		return nil, err
	}
	cells, _ := composite.Cells(composite.Grid2, compositeWidth, compositeHeight)
	var streams []ffmpeg.Stream
	var content []composite.Cell
	for i, p := range ports {
		streams = append(streams, ffmpeg.Stream{Kind: media.Video, PT: 96, Codec: "VP8/90000", Rate: 90000, MIME: "video/VP8", Port: p})
		name := filepath.Join(dir, "name"+strconv.Itoa(i)+".txt")
		if err := os.WriteFile(name, []byte(fmt.Sprintf("Camera %d", i+1)), 0o644); err != nil {
			return nil, err
		}
		content = append(content, composite.Cell{Input: i, NameFile: name})
	}
	sdp := filepath.Join(dir, "composite.sdp")
	if err := os.WriteFile(sdp, []byte(ffmpeg.SDP(streams...)), 0o644); err != nil {
		return nil, err
	}
	font := composite.DefaultFont
	if _, err := os.Stat(font); err != nil {
		font = ""
	}
	r, err := newFrameReader(nil)
	if err != nil {
		return nil, err
	}
	// The node's child's arguments (composite's args), without its
	// progress pipe.
	kbps := strconv.Itoa(max(150, compositeWidth*compositeHeight*compositeFPS/8000)) + "k"
	cmd := exec.Command(f.cfg.FFmpeg, "-hide_banner", "-nostdin", "-loglevel", "error",
		"-protocol_whitelist", "file,udp,rtp", "-fflags", "+genpts", "-reorder_queue_size", "64",
		"-fpsprobesize", "0", "-analyzeduration", "1000000", "-probesize", "1000000", "-i", sdp,
		"-filter_complex", composite.Graph(cells, content, compositeWidth, compositeHeight, compositeFPS, font),
		"-map", "[out]", "-r", strconv.Itoa(compositeFPS), "-force_key_frames", "expr:gte(t,n_forced*2)",
		"-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", kbps,
		"-g", strconv.Itoa(2*compositeFPS), "-error-resilient", "1", "-lag-in-frames", "0", "-auto-alt-ref", "0",
		"-f", "rtp", "-payload_type", "96", "rtp://127.0.0.1:"+strconv.Itoa(r.port())+"?pkt_size=1200")
	cmd.Stderr = &tail{max: 4096}
	proc.Nice(cmd, f.cfg.Nice)
	if err := cmd.Start(); err != nil {
		return r, err
	}
	f.mu.Lock()
	f.cmds = append(f.cmds, cmd)
	f.mu.Unlock()
	// ffmpeg binds its inputs once it has read the SDP; the cameras wait
	// for that, and it waits for their keyframes.
	time.Sleep(200 * time.Millisecond)
	for _, p := range ports {
		cam, err := NewCamera()
		if err != nil {
			return r, err
		}
		f.player.Add(cam, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)))
	}
	f.readers = append(f.readers, r)
	return r, nil
}

func (f *ffmpegComposites) ready(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for i, r := range f.readers {
		for r.packets.Load() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("ffmpeg %d sent nothing in 30 s: %s", i+1, f.cmds[i].Stderr)
			}
			if !sleep(ctx, 250*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	return nil
}

func (f *ffmpegComposites) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []int
	for _, c := range f.cmds {
		ps = append(ps, c.Process.Pid)
	}
	return ps
}

func (f *ffmpegComposites) cpu() float64    { return pidsCPU(f.pids)() }
func (f *ffmpegComposites) version() string { return ffmpegVersion(f.cfg.FFmpeg) }

func (f *ffmpegComposites) stop() {
	f.mu.Lock()
	cmds := f.cmds
	f.cmds = nil
	f.mu.Unlock()
	for _, c := range cmds {
		proc.Stop(c, 2*time.Second)
	}
}

// ffmpegVersion is the first line of `ffmpeg -version`, shortened.
func ffmpegVersion(bin string) string {
	out, _ := exec.Command(bin, "-version").Output()
	line, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(line); len(f) >= 3 {
		return f[0] + " " + f[2]
	}
	return strings.TrimSpace(line)
}

// tail keeps the last max bytes written to it (a child's stderr).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
