package vtranscode

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/supervise"
)

// Errors of Subscribe. ErrLimit and ErrCapacity wrap
// capacity.ErrOverCapacity: the API answers them 503 over_capacity.
var (
	ErrLimit    = fmt.Errorf("vtranscode: the node runs as many video transcoders as it may (vtranscode.max): %w", capacity.ErrOverCapacity)
	ErrCapacity = fmt.Errorf("vtranscode: the video transcoders' measured CPU would pass vtranscode.cores: %w", capacity.ErrOverCapacity)
	ErrCodec    = errors.New("vtranscode: no transcoding to or from this codec")
	ErrNoFFmpeg = errors.New("vtranscode: ffmpeg is not installed (streaming.ffmpeg)")
	ErrClosed   = errors.New("vtranscode: the hub is closed")
)

// Options configure a Hub.
type Options struct {
	// Dir holds a directory per transcoder (its SDP).
	Dir string
	// FFmpeg is the ffmpeg binary; "ffmpeg".
	FFmpeg string
	// Max is how many transcoders run at once; 8.
	Max int
	// Cores is the CPU the children may use, by their measured load: a
	// new one is refused when the running ones' load plus one more's
	// average would pass it. 0 means half the node's CPUs.
	Cores float64
	// MaxWidth, MaxHeight and MaxFPS cap every transcoder's output,
	// whatever its receivers take; 1280×720 at 30.
	MaxWidth, MaxHeight, MaxFPS int
	// Admit, if set, asks the node's capacity governor for pps packets/s
	// more (an error refuses the transcoder).
	Admit      func(what string, pps float64) error
	Supervisor *supervise.Supervisor
	Metrics    *Metrics
	Logger     *slog.Logger
}

// key is what one transcoder serves.
type key struct {
	src *broker.Track
	tgt Target
}

// Hub runs the node's video transcoders, one per source track and Target
// class, shared by every receiver of that class.
type Hub struct {
	o Options

	mu      sync.Mutex
	byKey   map[key]*Transcoder
	pending int // being started
	closed  bool
	// stopping are the transcoders being stopped: their child may take
	// up to 2 s to end, which no receiver's goroutine waits for.
	stopping sync.WaitGroup
}

// NewHub returns a hub with no transcoders.
func NewHub(o Options) *Hub {
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(os.TempDir(), fmt.Sprintf("convene-vtranscode-%d", os.Getpid()))
	}
	if o.Max <= 0 {
		o.Max = 8
	}
	if o.Cores <= 0 {
		o.Cores = 0.5 * float64(runtime.NumCPU())
	}
	if o.MaxWidth <= 0 || o.MaxHeight <= 0 {
		o.MaxWidth, o.MaxHeight = 1280, 720
	}
	if o.MaxFPS <= 0 {
		o.MaxFPS = 30
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	// Transcoders do not outlive the node.
	if err := os.RemoveAll(o.Dir); err != nil {
		o.Logger.Warn("vtranscode: remove old directories", "dir", o.Dir, "err", err)
	}
	return &Hub{o: o, byKey: map[key]*Transcoder{}}
}

// Sub is one receiver of a transcoder.
type Sub struct {
	t    *Transcoder
	id   string
	once sync.Once
}

// Stop ends the receiver; the transcoder stops with its last receiver.
func (s *Sub) Stop() { s.once.Do(func() { s.t.h.leave(s.t, s.id) }) }

// Keyframe passes the receiver's keyframe request (PLI, FIR) on: the
// source's publisher is asked, and the child's encoder makes a keyframe
// of the one it decodes.
func (s *Sub) Keyframe() { s.t.keyframe() }

// Target is the class the receiver gets.
func (s *Sub) Target() Target { return s.t.tgt }

// Subscribe makes out receive source track src of room transcoded to tgt
// (its class: the hub's caps and the size and rate classes apply), from a
// transcoder it shares with every other receiver of the same class; the
// packets reach out from the transcoder's own track. A new transcoder is
// admitted first (ErrLimit, ErrCapacity, the governor's refusal).
func (h *Hub) Subscribe(room *broker.Room, src *broker.Track, tgt Target, out broker.Sink) (*Sub, error) {
	c, ok := tgt.class(h.o.MaxWidth, h.o.MaxHeight, h.o.MaxFPS)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrCodec, tgt.Codec)
	}
	if _, ok := SourceCodec(src); !ok {
		return nil, fmt.Errorf("%w: source %s", ErrCodec, src.ID())
	}
	k := key{src, c}
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		if t := h.byKey[k]; t != nil {
			id, err := t.join(out)
			h.mu.Unlock()
			if err != nil {
				return nil, err
			}
			h.o.Metrics.receivers.Inc()
			return &Sub{t: t, id: id}, nil
		}
		if err := h.admitLocked(c); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.pending++
		h.mu.Unlock()
		t, err := h.start(room, src, c)
		h.mu.Lock()
		h.pending--
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		if h.closed || h.byKey[k] != nil {
			// Closed, or another receiver's transcoder won the race: use it.
			h.mu.Unlock()
			t.close()
			continue
		}
		h.byKey[k] = t
		h.o.Metrics.running.Inc()
		h.mu.Unlock()
		h.o.Logger.Info("video transcoder started", "transcoder", t.id, "source", src.ID(), "codec", c.Codec,
			"size", fmt.Sprintf("%dx%d", c.Width, c.Height), "fps", c.FPS)
	}
}

// admitLocked refuses a new transcoder beyond Max, beyond Cores by the
// running ones' measured load, or by the node's governor (under mu).
func (h *Hub) admitLocked(c Target) error {
	n := len(h.byKey) + h.pending
	if n >= h.o.Max {
		h.o.Metrics.refused.WithLabelValues("limit").Inc()
		return fmt.Errorf("%w; %d run", ErrLimit, h.o.Max)
	}
	load := 0.0
	for _, t := range h.byKey {
		load += t.cores()
	}
	if k := len(h.byKey); k > 0 && load+load/float64(k) > h.o.Cores {
		h.o.Metrics.refused.WithLabelValues("cpu").Inc()
		return fmt.Errorf("%w (%d transcoders measured at %.2f of %.2f cores)", ErrCapacity, k, load, h.o.Cores)
	}
	if h.o.Admit != nil {
		// About two packets a frame into the child and two out of it.
		if err := h.o.Admit("vtranscode", float64(4*c.FPS)); err != nil {
			h.o.Metrics.refused.WithLabelValues("capacity").Inc()
			return err
		}
	}
	return nil
}

func (h *Hub) start(room *broker.Room, src *broker.Track, c Target) (*Transcoder, error) {
	if _, err := exec.LookPath(h.o.FFmpeg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoFFmpeg, err)
	}
	id := fmt.Sprintf("vt_%012x", rand.Uint64()>>16)
	return newTranscoder(h, id, room, src, c)
}

// leave takes receiver id off t, and stops t with its last receiver.
func (h *Hub) leave(t *Transcoder, id string) {
	h.mu.Lock()
	last := t.leave(id) == 0 && h.byKey[t.key()] == t
	if last {
		delete(h.byKey, t.key())
		h.o.Metrics.running.Dec()
	}
	h.mu.Unlock()
	h.o.Metrics.receivers.Dec()
	if last {
		h.o.Logger.Info("video transcoder stops: its last receiver left", "transcoder", t.id, "source", t.src.ID())
		h.stopping.Add(1)
		go func() {
			defer h.stopping.Done()
			t.close()
		}()
	}
}

// Info describes a running transcoder.
type Info struct {
	ID        string  `json:"id"`
	Source    string  `json:"source"`
	Codec     string  `json:"codec"`
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	FPS       int     `json:"fps"`
	Receivers int     `json:"receivers"`
	PID       int     `json:"pid"`
	Starts    uint64  `json:"starts"`
	Frames    uint64  `json:"frames"`
	LoadCores float64 `json:"load_cores"`
}

// List describes the running transcoders, by ID.
func (h *Hub) List() []Info {
	h.mu.Lock()
	ts := make([]*Transcoder, 0, len(h.byKey))
	for _, t := range h.byKey {
		ts = append(ts, t)
	}
	h.mu.Unlock()
	out := make([]Info, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Count is how many transcoders run.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byKey)
}

// Close stops every transcoder (the node drains).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	ts := h.byKey
	h.byKey = map[key]*Transcoder{}
	h.mu.Unlock()
	for _, t := range ts {
		t.close()
		h.o.Metrics.running.Dec()
	}
	h.stopping.Wait()
}
