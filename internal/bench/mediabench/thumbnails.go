package mediabench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
)

// ThumbnailInterval is the grabbers' interval (thumbnail.Options.Interval's
// default): each makes a JPEG every 3 s.
const ThumbnailInterval = 3 * time.Second

// ThumbBar is the share of the expected JPEGs a step must make: a grabber
// that falls behind its camera makes fewer, and one image a grabber on
// either edge of the window is what the windows' phase may cost.
const ThumbBar = 0.95

// ThumbPoint is one step: Tracks video tracks, a grabber on each.
type ThumbPoint struct {
	Tracks int `json:"tracks"`
	// Images is the JPEGs made in the window, Expected what the tracks'
	// grabbers at their interval make in it.
	Images    float64 `json:"images"`
	Expected  float64 `json:"expected"`
	PerSecond float64 `json:"images_per_s"`
	Usage
	// CPUPerImage is the system's CPU per JPEG, in ms.
	CPUPerImage float64 `json:"cpu_ms_per_image"`
	// CPUPerGrabber is its CPU per grabber, in cores.
	CPUPerGrabber float64 `json:"cpu_cores_per_grabber"`
	OK            bool    `json:"ok"`
	Retry         bool    `json:"retry,omitempty"`
}

// ThumbSeries is the node's grabbers, step by step.
type ThumbSeries struct {
	System  string       `json:"system"`
	Version string       `json:"version"`
	Points  []ThumbPoint `json:"points"`
	// MaxOK is the most tracks at the bar; PerSecond and CPUPerImage
	// there.
	MaxOK       int     `json:"max_ok"`
	PerSecond   float64 `json:"images_per_s_at_max"`
	CPUPerImage float64 `json:"cpu_ms_per_image_at_max"`
	// Ended says why the series stopped (EndedMiss …).
	Ended string `json:"ended"`
	Note  string `json:"note,omitempty"`
}

func runThumbnails(ctx context.Context, cfg Config, rec *Recording, end time.Time) []ThumbSeries {
	s := ThumbSeries{System: "convene", Ended: EndedSteps}
	defer func() {
		if s.Note != "" && s.Ended == EndedSteps {
			s.Ended = EndedError
		}
		if s.Note != "" {
			fmt.Fprintf(cfg.Log, "  thumbnails/convene: %s\n", s.Note)
		}
	}()
	n, err := startNode(cfg)
	if err != nil {
		s.Note = err.Error()
		return []ThumbSeries{s}
	}
	defer n.Stop()
	s.Version = n.Version
	player := NewPlayer(rec, nil)
	defer player.Stop()
	type track struct{ session, link string }
	var tracks []track
	// Grabbers stop a minute after the last request: ask again every 20 s.
	kctx, stopKeep := context.WithCancel(ctx)
	var keep sync.WaitGroup
	defer func() {
		stopKeep()
		keep.Wait()
	}()
	var mu sync.Mutex
	keep.Add(1)
	go func() {
		defer keep.Done()
		for sleep(kctx, 20*time.Second) {
			mu.Lock()
			ts := append([]track(nil), tracks...)
			mu.Unlock()
			for _, t := range ts {
				_ = thumbnail(kctx, n, t.session, t.link)
			}
		}
	}()
	window := cfg.ThumbnailWindow
	for _, want := range cfg.ThumbnailSteps {
		if time.Now().Add(cfg.Warmup + window + 3*time.Second).After(end) {
			s.Note = fmt.Sprintf("stopped before %d tracks: out of time budget", want)
			s.Ended = EndedBudget
			break
		}
		t0 := time.Now()
		var added []track
		for len(tracks)+len(added) < want {
			cams := min(compositeCams, want-len(tracks)-len(added))
			cs, err := newCameraSession(n, player, fmt.Sprintf("thumbnails-%d", len(tracks)+len(added)), cams)
			if err != nil {
				s.Note = err.Error()
				return []ThumbSeries{s}
			}
			for _, l := range cs.links {
				added = append(added, track{cs.id, l.ID})
			}
		}
		// Start the new grabbers together, 32 requests at a time; each
		// answers with its first image.
		errs := make(chan error, len(added))
		sem := make(chan struct{}, 32)
		for _, t := range added {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				var err error
				for try := 0; try < 5; try++ {
					if err = thumbnail(ctx, n, t.session, t.link); err == nil {
						break
					}
					sleep(ctx, time.Second)
				}
				errs <- err
			}()
		}
		for range added {
			if err := <-errs; err != nil {
				s.Note = fmt.Sprintf("%d tracks: %v", want, err)
				return []ThumbSeries{s}
			}
		}
		mu.Lock()
		tracks = append(tracks, added...)
		mu.Unlock()
		fmt.Fprintf(cfg.Log, "  thumbnails/convene: %d grabbers running after %v\n", len(tracks), time.Since(t0).Round(time.Millisecond))
		if !sleep(ctx, cfg.Warmup) {
			break
		}
		k := len(tracks)
		tries := results.Tries(func(retry bool) ThumbPoint {
			p := ThumbPoint{Tracks: k, Retry: retry}
			i0, _ := n.Metric("convene_thumbnail_images_total")
			a := sample(func() float64 { return proc.TreeCPU(n.PID()) })
			sleep(ctx, window)
			b := sample(func() float64 { return proc.TreeCPU(n.PID()) })
			i1, _ := n.Metric("convene_thumbnail_images_total")
			el := b.at.Sub(a.at)
			p.Usage = b.since(a)
			p.Images = i1 - i0
			p.Expected = float64(k) * el.Seconds() / ThumbnailInterval.Seconds()
			p.PerSecond = p.Images / el.Seconds()
			if p.Images > 0 {
				p.CPUPerImage = 1000 * p.CPU / p.PerSecond
			}
			p.CPUPerGrabber = p.CPU / float64(k)
			p.OK = p.Images >= ThumbBar*p.Expected
			return p
		}, func(p ThumbPoint) bool { return p.OK }, func(p ThumbPoint) float64 { return p.Others },
			func() bool { return ctx.Err() == nil && time.Now().Add(window+5*time.Second).Before(end) })
		for _, p := range tries {
			s.Points = append(s.Points, p)
			fmt.Fprintf(cfg.Log, "  thumbnails/convene tracks=%d images=%.0f of %.1f (%.2f/s) cpu=%.2f cores (%.1f ms per image) load %.2f machine %.0f%% others %.2f ok=%v\n",
				p.Tracks, p.Images, p.Expected, p.PerSecond, p.CPU, p.CPUPerImage, p.LoadCPU, p.MachineBusy, p.Others, p.OK)
		}
		p := tries[len(tries)-1]
		if !p.OK {
			s.Ended = EndedMiss
			break
		}
		s.MaxOK, s.PerSecond, s.CPUPerImage = k, p.PerSecond, p.CPUPerImage
	}
	return []ThumbSeries{s}
}

// thumbnail asks the node for a track's thumbnail (starting its grabber).
func thumbnail(ctx context.Context, n *convene.Node, session, track string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/api/v1/sessions/"+session+"/tracks/"+track+"/thumbnail.jpg", nil)
	req.Header.Set("X-API-Key", n.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("thumbnail of %s: %d %s", track, resp.StatusCode, b)
	}
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return fmt.Errorf("thumbnail of %s: not a JPEG (%d bytes)", track, len(b))
	}
	return nil
}
