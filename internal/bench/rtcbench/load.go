package rtcbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/bench/janus"
	"github.com/convene/convene/internal/rtctest"
)

// LoadConfig tells the load process what to subscribe to.
type LoadConfig struct {
	System  string   `json:"system"` // "convene" or "janus"
	URL     string   `json:"url"`    // the node's base URL, or Janus's /janus URL
	Session string   `json:"session,omitempty"`
	Tokens  []string `json:"tokens,omitempty"` // member tokens, one per subscriber (convene)
	Feed    int64    `json:"feed,omitempty"`   // the publisher's feed ID (janus)
	N       int      `json:"n"`
	Window  Duration `json:"window"`
	// Profile, when set, is where the load process writes a CPU profile
	// of itself over the window (to see whether it, not the server, is
	// the limit).
	Profile string `json:"profile,omitempty"`

	scenario string // for profile names; not sent
}

// Duration is a time.Duration that JSON writes as a string.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// LoadResult is what the load process measured over its window.
type LoadResult struct {
	Joined   int     `json:"joined"`
	JoinP50  float64 `json:"join_p50_ms"` // dial to first packet
	JoinP95  float64 `json:"join_p95_ms"`
	Received uint64  `json:"received"` // packets in the window, all subscribers
	Expected uint64  `json:"expected"`
	Loss     float64 `json:"loss"`
	// Lossy is how many subscribers lost more than 1% on their own.
	Lossy   int     `json:"lossy_subscribers"`
	LatP50  float64 `json:"latency_p50_ms"`
	LatP95  float64 `json:"latency_p95_ms"`
	LatP99  float64 `json:"latency_p99_ms"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

type subscriber struct {
	c     *rtctest.Client
	start time.Time
	close func()
}

// RunLoad subscribes cfg.N clients, tells start (through ready) when all
// receive, measures for cfg.Window and writes the result as JSON to out.
func RunLoad(ctx context.Context, cfg LoadConfig, ready io.Writer, out io.Writer) error {
	// The load process is the limit of this benchmark past ~800
	// subscribers (one CPU of pion receivers); collecting its heap five
	// times less often, as recbench's load does, gives it back the
	// CPU the collector took (5–7 % in its profiles), the same for every
	// system measured.
	defer debug.SetGCPercent(debug.SetGCPercent(loadGOGC))
	subs := make([]*subscriber, cfg.N)
	var js *janus.Session
	if cfg.System == "janus" {
		var err error
		if js, err = janus.NewSession(ctx, cfg.URL); err != nil {
			return err
		}
		defer js.Close()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, cfg.N)
	for i := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			s := &subscriber{start: time.Now()}
			var err error
			if cfg.System == "janus" {
				err = janusSubscribe(dctx, js, cfg.Feed, s)
			} else {
				s.c, err = rtctest.Dial(dctx, cfg.URL, cfg.Session, cfg.Tokens[i], rtctest.Options{})
				if err == nil {
					s.close = s.c.Close
				}
			}
			if err != nil {
				errs <- err
				return
			}
			subs[i] = s
		}(i)
	}
	wg.Wait()
	close(errs)
	defer func() {
		for _, s := range subs {
			if s != nil && s.close != nil {
				s.close()
			}
		}
	}()
	var res LoadResult
	for err := range errs {
		res.Error = err.Error()
	}
	// Wait until every subscriber receives.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, s := range subs {
			if s != nil && receiving(s.c) {
				n++
			}
		}
		res.Joined = n
		if n == cfg.N {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var joins []float64
	for _, s := range subs {
		if s == nil {
			continue
		}
		first := int64(0)
		for _, r := range s.c.Received() {
			if f := r.First.Load(); f != 0 && (first == 0 || f < first) {
				first = f
			}
		}
		if first != 0 {
			joins = append(joins, float64(first-s.start.UnixNano())/1e6)
		}
	}
	res.JoinP50, res.JoinP95 = pct(joins, 0.5), pct(joins, 0.95)
	fmt.Fprintln(ready, "window start")
	if cfg.Profile != "" {
		if f, err := os.Create(cfg.Profile); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			} else {
				f.Close()
			}
		}
	}
	before := snapshot(subs)
	start := time.Now()
	select {
	case <-time.After(time.Duration(cfg.Window)):
	case <-ctx.Done():
		return ctx.Err()
	}
	after := snapshot(subs)
	for i, sub := range subs {
		if sub == nil {
			continue
		}
		b, a := before.per[i], after.per[i]
		if exp := a[1] - b[1]; exp > 0 && a[0]-b[0] < exp && float64(exp-(a[0]-b[0]))/float64(exp) > MaxLoss {
			res.Lossy++
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Received = after.packets - before.packets
	res.Expected = after.expected - before.expected
	if res.Expected > 0 && res.Expected > res.Received {
		res.Loss = float64(res.Expected-res.Received) / float64(res.Expected)
	}
	var hist [rtctest.LatencyBuckets]uint64
	for i := range hist {
		hist[i] = after.lat[i] - before.lat[i]
	}
	res.LatP50, res.LatP95, res.LatP99 = HistPct(hist[:], 0.5), HistPct(hist[:], 0.95), HistPct(hist[:], 0.99)
	return json.NewEncoder(out).Encode(res)
}

// loadGOGC is the load process's GOGC during a run.
const loadGOGC = 400

func receiving(c *rtctest.Client) bool {
	for _, r := range c.Received() {
		if r.Packets.Load() > 0 {
			return true
		}
	}
	return false
}

type snap struct {
	packets, expected uint64
	per               [][2]uint64 // by subscriber: packets, expected
	lat               [rtctest.LatencyBuckets]uint64
}

func snapshot(subs []*subscriber) snap {
	s := snap{per: make([][2]uint64, len(subs))}
	for i, sub := range subs {
		if sub == nil {
			continue
		}
		for _, r := range sub.c.Received() {
			n := r.Packets.Load()
			s.packets += n
			s.per[i][0] += n
			if h := r.High.Load(); h != 0 {
				s.expected += uint64(h) // differences of High count what was sent meanwhile
				s.per[i][1] += uint64(h)
			}
			for i := range s.lat {
				s.lat[i] += uint64(r.Latency[i].Load())
			}
		}
	}
	return s
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[min(len(v)-1, int(p*float64(len(v))))]
}

// HistPct is the p-th percentile of a histogram of 1 ms buckets (as
// rtctest.Recv.Latency counts), as the middle of its bucket.
func HistPct(h []uint64, p float64) float64 {
	var total uint64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := uint64(p * float64(total))
	var acc uint64
	for i, n := range h {
		acc += n
		if acc > want {
			return float64(i) + 0.5
		}
	}
	return float64(len(h))
}

// janusSubscribe joins the VideoRoom as a subscriber of feed.
func janusSubscribe(ctx context.Context, js *janus.Session, feed int64, s *subscriber) error {
	h, offer, err := js.Subscribe(ctx, Room, []int64{feed})
	if err != nil {
		return err
	}
	if s.c, err = rtctest.NewViewer(rtctest.Options{Interface: janus.Interface}); err != nil {
		return err
	}
	s.close = s.c.Close
	ans, err := s.c.AnswerOffer(offer)
	if err != nil {
		return err
	}
	if err = h.Start(ctx, ans); err != nil {
		return err
	}
	// Equal quality: the highest simulcast layer, as Convene's subscribers
	// get when the estimate allows. Janus starts a subscriber on another
	// layer, and numbers rid layers in the reverse of the SDP's l;m;h
	// order: its substream 0 is our "h" (checked by the packet rate each
	// subscriber gets, the same as Convene's).
	if mid := janus.VideoMid(offer); mid != "" {
		_, err = h.Message(ctx, map[string]any{"request": "configure", "streams": []map[string]any{{"mid": mid, "substream": 0, "temporal": 2}}}, nil, "")
	}
	return err
}

// JanusPublish joins the VideoRoom as the publisher and returns its feed.
func JanusPublish(ctx context.Context, url string, pub *rtctest.Client, offer string) (int64, func(), error) {
	js, err := janus.NewSession(ctx, url)
	if err != nil {
		return 0, nil, err
	}
	_, answer, id, err := js.Publish(ctx, Room, "pub", offer)
	if err != nil {
		js.Close()
		return 0, nil, err
	}
	if os.Getenv("JANUS_DEBUG") != "" {
		fmt.Fprintln(os.Stderr, answer)
	}
	if err := pub.SetAnswer(answer); err != nil {
		js.Close()
		return 0, nil, err
	}
	// Janus lists the feed for subscribers once its media is up.
	for pub.Pub.ConnectionState() != webrtc.PeerConnectionStateConnected {
		select {
		case <-ctx.Done():
			js.Close()
			return 0, nil, fmt.Errorf("the publisher's connection to janus: %s", pub.Pub.ConnectionState())
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(500 * time.Millisecond)
	return id, js.Close, nil
}
