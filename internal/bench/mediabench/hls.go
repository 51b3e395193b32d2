package mediabench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
)

// ViewerSeries is one origin's viewers, step by step.
type ViewerSeries struct {
	System  string        `json:"system"`
	Version string        `json:"version"`
	Points  []ViewerPoint `json:"points"`
	// MaxOK is the most viewers at full rate, MBps their bytes a second.
	MaxOK int     `json:"max_ok"`
	MBps  float64 `json:"mb_per_s_at_max"`
	// AtLimit: the series stopped at the machine's loopback limit, not at
	// a miss.
	AtLimit bool `json:"at_loopback_limit,omitempty"`
	// ProducerCPU is the encoder's CPU (the node's HLS child, or the
	// peer's ffmpeg) with no viewers, in cores.
	ProducerCPU float64 `json:"producer_cpu_cores"`
	// ServerCPU says whose CPU the points' cpu is.
	ServerCPU string `json:"server_cpu"`
	// Ended says why the series stopped (EndedMiss …).
	Ended string `json:"ended"`
	Note  string `json:"note,omitempty"`
}

// producerWindow is how long the producers' CPU is measured with nobody
// watching.
const producerWindow = 3 * time.Second

// LimitShare is how close to the loopback limit the viewers' bytes a
// second may come before the series stops there.
const LimitShare = 0.9

// hlsSegment and hlsList are the peer's ffmpeg HLS settings: the node's
// before its HLS became LL-HLS (gohlslib: 7 segments in the playlists),
// kept so that the peer's runs compare with earlier ones. The node runs
// with segments as long (streaming.hls_segment; its default is 1 s): a
// viewer without LL-HLS makes as many requests of either.
const (
	hlsSegment = "2"
	hlsList    = 6
)

func runHLS(ctx context.Context, cfg Config, rec *Recording, limit float64, end time.Time) []ViewerSeries {
	conv := ViewerSeries{System: "convene", ServerCPU: "the node's process (its HLS child's encoding apart)"}
	fail := func(err error) []ViewerSeries {
		conv.Note, conv.Ended = err.Error(), EndedError
		fmt.Fprintf(cfg.Log, "  hls: %v\n", err)
		return []ViewerSeries{conv}
	}
	tone, err := Tone()
	if err != nil {
		return fail(err)
	}
	n, err := startNode(cfg)
	if err != nil {
		return fail(err)
	}
	defer n.Stop()
	conv.Version = n.Version
	player := NewPlayer(rec, tone)
	defer player.Stop()
	var s struct {
		ID string `json:"id"`
	}
	if err := n.API("POST", "/api/v1/sessions", map[string]string{"name": "hls"}, &s); err != nil {
		return fail(err)
	}
	vl, vcam, err := addCamera(n, s.ID, "Presenter", "video")
	if err != nil {
		return fail(err)
	}
	al, mic, err := addCamera(n, s.ID, "Presenter's microphone", "audio")
	if err != nil {
		vcam.Close()
		return fail(err)
	}
	vto, err1 := vl.to()
	ato, err2 := al.to()
	if err1 != nil || err2 != nil {
		vcam.Close()
		mic.Close()
		return fail(fmt.Errorf("links: %v %v", err1, err2))
	}
	var peer *hlsPeer
	peerNote := "not measured"
	if cfg.Peers {
		if peer, err = startHLSPeer(cfg); err != nil {
			peerNote = err.Error()
			fmt.Fprintf(cfg.Log, "  hls/nginx: %v\n", err)
		} else {
			defer peer.stop()
			lo := netip.MustParseAddr("127.0.0.1")
			player.Add(vcam, vto, netip.AddrPortFrom(lo, uint16(peer.videoPort)))
			player.AddMic(mic, ato, netip.AddrPortFrom(lo, uint16(peer.audioPort)))
		}
	}
	if peer == nil {
		player.Add(vcam, vto)
		player.AddMic(mic, ato)
	}
	var info struct {
		Playlist string `json:"playlist"`
	}
	if err := n.API("POST", "/api/v1/sessions/"+s.ID+"/hls", map[string]any{}, &info); err != nil {
		return fail(err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := n.API("POST", "/api/v1/sessions/"+s.ID+"/tokens", map[string]any{"role": "listener", "ttl_seconds": 3600, "max_uses": 10000}, &tok); err != nil {
		return fail(err)
	}
	openConvene := func(c *http.Client) (string, error) {
		resp, err := c.Get(n.URL + info.Playlist + "?token=" + tok.Token)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			return "", fmt.Errorf("%w %d opening the node's playlist", errStatus, resp.StatusCode)
		}
		// The node's LL-HLS opens with a multivariant playlist: a viewer
		// follows its video's media playlist, as a player without LL-HLS
		// would (whole fMP4 segments; the audio rendition is not fetched).
		master := n.URL + resp.Header.Get("Location")
		resp, err = c.Get(master)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%w %d reading the node's playlist", errStatus, resp.StatusCode)
		}
		v, err := FirstVariant(b)
		if err != nil {
			return "", err
		}
		base, err := url.Parse(master)
		if err != nil {
			return "", err
		}
		ref, err := url.Parse(v)
		if err != nil {
			return "", err
		}
		return base.ResolveReference(ref).String(), nil
	}
	// Both streams running, three segments each, before anyone watches.
	t0 := time.Now()
	if err := waitSegments(ctx, openConvene, 3, 40*time.Second); err != nil {
		return fail(fmt.Errorf("the node's stream: %w", err))
	}
	if peer != nil {
		if err := waitSegments(ctx, peer.open, 3, 40*time.Second); err != nil {
			peerNote = fmt.Sprintf("ffmpeg's stream: %v: %s", err, peer.ffmpegErr)
			fmt.Fprintf(cfg.Log, "  hls/nginx: %s\n", peerNote)
			peer.stop()
			peer = nil
		}
	}
	fmt.Fprintf(cfg.Log, "  hls: streams up after %v\n", time.Since(t0).Round(time.Millisecond))
	// The producers' CPU with nobody watching.
	nodeOwn := func() float64 { _, c, _ := proc.Process(n.PID()); return c }
	children := func() float64 { return proc.TreeCPU(n.PID()) - nodeOwn() }
	a := sample(children)
	var pa meter
	if peer != nil {
		pa = sample(peer.ffmpegCPU)
	}
	sleep(ctx, producerWindow)
	conv.ProducerCPU = sample(children).since(a).CPU
	var series []ViewerSeries
	var ng ViewerSeries
	if peer != nil {
		ng = ViewerSeries{System: "nginx", Version: peer.ng.Version + " + " + ffmpegVersion(cfg.FFmpeg) + " -f hls",
			ServerCPU: "nginx's master and workers", ProducerCPU: sample(peer.ffmpegCPU).since(pa).CPU}
	}
	fmt.Fprintf(cfg.Log, "  hls: producers with no viewers: node's child %.2f cores, ffmpeg's %.2f\n", conv.ProducerCPU, ng.ProducerCPU)
	// Each origin the same time, whatever the first left over.
	share := time.Until(end)
	if peer != nil {
		share /= 2
	}
	viewerSeries(ctx, cfg, &conv, openConvene, nodeOwn, limit, time.Now().Add(share))
	series = append(series, conv)
	if conv.Note != "" {
		fmt.Fprintf(cfg.Log, "  hls/convene: %s\n", conv.Note)
	}
	if peer != nil {
		viewerSeries(ctx, cfg, &ng, peer.open, func() float64 { return proc.TreeCPU(peer.ng.PID()) }, limit, time.Now().Add(share))
		series = append(series, ng)
		if ng.Note != "" {
			fmt.Fprintf(cfg.Log, "  hls/nginx: %s\n", ng.Note)
		}
	} else if cfg.Peers {
		series = append(series, ViewerSeries{System: "nginx", Note: peerNote, Ended: EndedError})
	}
	return series
}

// waitSegments waits until the playlist open gives lists k segments.
func waitSegments(ctx context.Context, open func(*http.Client) (string, error), k int, d time.Duration) error {
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	deadline := time.Now().Add(d)
	got := 0
	for time.Now().Before(deadline) {
		if u, err := open(c); err == nil {
			if resp, err := c.Get(u); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if p, err := ParsePlaylist(b); err == nil {
					if got = len(p.Segments); got >= k {
						return nil
					}
				}
			}
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%d of %d segments after %v", got, k, d)
}

// viewerSeries grows the viewers of one origin step by step.
func viewerSeries(ctx context.Context, cfg Config, s *ViewerSeries, open func(*http.Client) (string, error), cpu func() float64, limit float64, end time.Time) {
	stats := &viewStats{}
	vctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	viewers := 0
	s.Ended = EndedSteps
	// Players are not in step: the new ones start spread over a segment.
	const spread = 2 * time.Second
	for _, want := range cfg.ViewerSteps {
		if !timeFor(cfg, end, spread) {
			s.Note = fmt.Sprintf("stopped before %d viewers: out of time budget", want)
			s.Ended = EndedBudget
			break
		}
		k := want - viewers
		for i := range k {
			v := newViewer(open, stats)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sleep(vctx, time.Duration(i)*spread/time.Duration(max(1, k))) {
					v.run(vctx)
				}
			}()
		}
		viewers = want
		if !sleep(ctx, spread+cfg.Warmup) {
			return
		}
		tries := results.Tries(func(retry bool) ViewerPoint {
			stats.start()
			a := sample(cpu)
			sleep(ctx, cfg.Window)
			b := sample(cpu)
			p := stats.point(want, b.at.Sub(a.at))
			p.Usage, p.Retry = b.since(a), retry
			return p
		}, func(p ViewerPoint) bool { return p.OK }, func(p ViewerPoint) float64 { return p.Others },
			func() bool { return ctx.Err() == nil && time.Now().Add(cfg.Window+3*time.Second).Before(end) })
		for _, p := range tries {
			s.Points = append(s.Points, p)
			fmt.Fprintf(cfg.Log, "  hls/%s viewers=%d segments=%d %.1f MB/s fetch p50 %.1f p99 %.1f max %.1f ms late=%d errors=%d skipped=%d cpu=%.2f cores load %.2f machine %.0f%% others %.2f ok=%v %s\n",
				s.System, p.Viewers, p.Segments, p.MBps, p.P50, p.P99, p.Max, p.Late, p.Errors, p.Skipped, p.CPU, p.LoadCPU, p.MachineBusy, p.Others, p.OK, p.LastErr)
		}
		p := tries[len(tries)-1]
		if !p.OK {
			s.Ended = EndedMiss
			break
		}
		s.MaxOK, s.MBps = want, p.MBps
		if limit > 0 && p.MBps >= LimitShare*limit {
			s.AtLimit, s.Ended = true, EndedLimit
			break
		}
	}
}

// hlsPeer is the classic pipeline: ffmpeg's own HLS muxer, fed the same
// packets as the node, writing into a directory nginx serves.
type hlsPeer struct {
	cmd                  *exec.Cmd
	ffmpegErr            *tail
	ng                   *Nginx
	audioPort, videoPort int
}

func startHLSPeer(cfg Config) (*hlsPeer, error) {
	if _, err := exec.LookPath(cfg.Nginx); err != nil {
		return nil, fmt.Errorf("nginx is needed for the peer (scripts/install-deps.sh bench): %w", err)
	}
	// nginx's workers run as nobody when the benchmark is root: the
	// scratch directory must be readable by all.
	if err := os.Chmod(cfg.Tmp, 0o755); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.Tmp, "ffmpeg-hls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := ffmpeg.FreePorts(2)
	if err != nil {
		return nil, err
	}
	p := &hlsPeer{audioPort: ports[0], videoPort: ports[1], ffmpegErr: &tail{max: 4096}}
	sdp := filepath.Join(dir, "stream.sdp")
	if err := os.WriteFile(sdp, []byte(ffmpeg.SDP(
		ffmpeg.Stream{Kind: media.Audio, PT: 0, Codec: "PCMU/8000", Rate: 8000, Port: p.audioPort},
		ffmpeg.Stream{Kind: media.Video, PT: 96, Codec: "VP8/90000", Rate: 90000, MIME: "video/VP8", Port: p.videoPort})), 0o644); err != nil {
		return nil, err
	}
	// The node's HLS child's arguments (hls's args), without its progress
	// pipe: the same encoders, segments and list.
	p.cmd = exec.Command(cfg.FFmpeg, "-hide_banner", "-nostdin", "-loglevel", "error",
		"-protocol_whitelist", "file,udp,rtp", "-fflags", "+genpts", "-reorder_queue_size", "64",
		"-analyzeduration", "2000000", "-probesize", "1000000", "-i", sdp,
		"-map", "0:a", "-c:a", "aac", "-b:a", "96k", "-ar", "48000", "-ac", "2",
		"-map", "0:v", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency",
		"-pix_fmt", "yuv420p", "-b:v", "800k", "-maxrate", "1200k", "-bufsize", "1600k",
		"-force_key_frames", "expr:gte(t,n_forced*"+hlsSegment+")", "-sc_threshold", "0",
		"-f", "hls", "-hls_time", hlsSegment, "-hls_list_size", strconv.Itoa(hlsList),
		"-hls_flags", "delete_segments+append_list+independent_segments+omit_endlist+program_date_time",
		"-hls_delete_threshold", "2",
		"-hls_segment_filename", filepath.Join(dir, "seg%d.ts"), filepath.Join(dir, "index.m3u8"))
	p.cmd.Stderr = p.ffmpegErr
	proc.Nice(p.cmd, cfg.Nice)
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	ng, err := StartNginx(cfg.Nginx, filepath.Join(cfg.Tmp, "nginx"), dir, cfg.Nice)
	if err != nil {
		proc.Stop(p.cmd, 2*time.Second)
		return nil, err
	}
	p.ng = ng
	return p, nil
}

func (p *hlsPeer) open(*http.Client) (string, error) { return p.ng.URL + "/index.m3u8", nil }

func (p *hlsPeer) ffmpegCPU() float64 {
	_, c, _ := proc.Process(p.cmd.Process.Pid)
	return c
}

func (p *hlsPeer) stop() {
	if p.ng != nil {
		p.ng.Stop()
		p.ng = nil
	}
	if p.cmd != nil {
		proc.Stop(p.cmd, 2*time.Second)
		p.cmd = nil
	}
}
