package mediabench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"
)

// viewStats is what the viewers of a step measured together over a
// window; every viewer's goroutine adds to it.
type viewStats struct {
	mu       sync.Mutex
	open     bool
	fetches  []time.Duration // segment fetch times: request to last byte
	bytes    int64           // segments and playlists
	late     int             // segments fetched in more than their duration
	errors   int             // playlists or segments that failed
	skipped  int             // segments gone before fetched
	lastErr  string
	segments int
}

func (s *viewStats) segment(n int64, d time.Duration, late bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return
	}
	s.segments++
	s.bytes += n
	s.fetches = append(s.fetches, d)
	if late {
		s.late++
	}
}

func (s *viewStats) playlist(n int64) {
	s.mu.Lock()
	if s.open {
		s.bytes += n
	}
	s.mu.Unlock()
}

func (s *viewStats) fail(err error, skipped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return
	}
	s.skipped += skipped
	if err != nil {
		s.errors++
		s.lastErr = err.Error()
	}
}

func (s *viewStats) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open, s.fetches, s.bytes, s.late, s.errors, s.skipped, s.lastErr, s.segments = true, nil, 0, 0, 0, 0, "", 0
}

// ViewerPoint is one step: Viewers following the playlist.
type ViewerPoint struct {
	Viewers  int     `json:"viewers"`
	Segments int     `json:"segments"`
	MBps     float64 `json:"mb_per_s"`
	// P50 and P99 are segment fetch times (request to last byte), ms;
	// Max the slowest.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// Late segments took longer to fetch than to play; Errors are failed
	// requests; Skipped segments left the playlist before fetched.
	Late    int    `json:"late"`
	Errors  int    `json:"errors"`
	Skipped int    `json:"skipped"`
	LastErr string `json:"last_error,omitempty"`
	Usage
	OK    bool `json:"ok"`
	Retry bool `json:"retry,omitempty"`
}

func (s *viewStats) point(viewers int, el time.Duration) ViewerPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
	p := ViewerPoint{Viewers: viewers, Segments: s.segments, MBps: float64(s.bytes) / 1e6 / el.Seconds(),
		Late: s.late, Errors: s.errors, Skipped: s.skipped, LastErr: s.lastErr}
	if len(s.fetches) > 0 {
		sort.Slice(s.fetches, func(i, j int) bool { return s.fetches[i] < s.fetches[j] })
		pct := func(q float64) float64 {
			return float64(s.fetches[min(len(s.fetches)-1, int(q*float64(len(s.fetches))))]) / 1e6
		}
		p.P50, p.P99, p.Max = pct(0.5), pct(0.99), float64(s.fetches[len(s.fetches)-1])/1e6
	}
	p.OK = p.Segments > 0 && p.Late == 0 && p.Errors == 0 && p.Skipped == 0
	return p
}

// viewer is one player: its own HTTP client (its own keep-alive
// connection), following one playlist.
type viewer struct {
	client *http.Client
	// open returns the playlist's URL (the node's viewers are redirected
	// to a signed one first).
	open  func(c *http.Client) (string, error)
	stats *viewStats
}

func newViewer(open func(*http.Client) (string, error), stats *viewStats) *viewer {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true, IdleConnTimeout: time.Minute}
	return &viewer{client: &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, open: open, stats: stats}
}

// run follows the playlist until ctx ends: reload it as RFC 8216 §6.3.4
// says, fetch each new segment once.
func (v *viewer) run(ctx context.Context) {
	defer v.client.CloseIdleConnections()
	var f Follower
	playlist := ""
	for ctx.Err() == nil {
		t0 := time.Now()
		if playlist == "" {
			u, err := v.open(v.client)
			if err != nil {
				v.stats.fail(err, 0)
				sleep(ctx, time.Second)
				continue
			}
			playlist = u
		}
		body, err := v.get(ctx, playlist)
		if err != nil {
			if ctx.Err() == nil {
				v.stats.fail(err, 0)
			}
			sleep(ctx, time.Second)
			continue
		}
		v.stats.playlist(int64(len(body)))
		p, err := ParsePlaylist(body)
		if err != nil {
			v.stats.fail(err, 0)
			sleep(ctx, time.Second)
			continue
		}
		skipped := f.Skipped
		segs, changed := f.Update(p)
		if f.Skipped > skipped {
			v.stats.fail(nil, f.Skipped-skipped)
		}
		base, _ := url.Parse(playlist)
		for _, s := range segs {
			u, err := base.Parse(s.URI)
			if err != nil {
				v.stats.fail(err, 0)
				continue
			}
			st := time.Now()
			n, err := v.fetch(ctx, u.String())
			d := time.Since(st)
			if err != nil {
				if ctx.Err() == nil {
					v.stats.fail(err, 0)
				}
				continue
			}
			v.stats.segment(n, d, d > s.Duration)
		}
		sleep(ctx, Reload(p, changed)-time.Since(t0))
	}
}

var errStatus = errors.New("HTTP status")

func (v *viewer) get(ctx context.Context, u string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("%w %d for %s", errStatus, resp.StatusCode, u)
	}
	return b, err
}

// fetch reads a segment to its end, keeping none of it.
func (v *viewer) fetch(ctx context.Context, u string) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("%w %d for %s", errStatus, resp.StatusCode, u)
	}
	return n, err
}
