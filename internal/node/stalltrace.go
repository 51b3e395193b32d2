package node

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"sync"
	"time"

	"github.com/convene/convene/internal/udpmux"
)

// Stall traces (log.stall_trace): Go's flight recorder keeps the last few
// seconds of the execution trace in memory, and a media stall — a send or
// a read that waited past udpmux.StallAt in the node — writes them out a
// moment later, so the trace shows what every goroutine and thread did
// before, during and just after it. Bounded: at most stallTraces files,
// one per stallEvery, each at most stallBytes.
const (
	stallTraces = 5
	stallEvery  = time.Minute
	stallAfter  = 500 * time.Millisecond
	stallWindow = 3 * time.Second
	stallBytes  = 64 << 20
)

type stallTracer struct {
	dir  string
	fr   *trace.FlightRecorder
	log  *slog.Logger
	mu   sync.Mutex
	last time.Time
	n    int
	wg   sync.WaitGroup
}

// startStallTrace starts the flight recorder and hooks the media path's
// stalls; nil when dir is empty. The directory is created.
func startStallTrace(dir string, log *slog.Logger) (*stallTracer, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("log.stall_trace: %w", err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: stallWindow, MaxBytes: stallBytes})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("log.stall_trace: %w", err)
	}
	t := &stallTracer{dir: dir, fr: fr, log: log}
	udpmux.OnStall(t.stall)
	return t, nil
}

// stall is udpmux's hook: it must return at once.
func (t *stallTracer) stall(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.fr == nil || t.n >= stallTraces || (!t.last.IsZero() && now.Sub(t.last) < stallEvery) {
		return
	}
	t.last = now
	t.n++
	path := filepath.Join(t.dir, fmt.Sprintf("stall-%s-%dms.trace", now.UTC().Format("20060102-150405.000"), d.Milliseconds()))
	fr := t.fr
	t.wg.Add(1) // under mu, before stop clears fr: never after stop's Wait began
	go func() {
		defer t.wg.Done()
		time.Sleep(stallAfter)
		if err := writeTrace(fr, path); err != nil {
			t.log.Warn("stall trace", "err", err)
			return
		}
		t.log.Warn("media stall: execution trace written", "wait_ms", d.Milliseconds(), "path", path)
	}()
}

// writeTrace writes fr's window to a new file at path; fr is stopped only
// after every write (stallTracer.stop waits for them).
func writeTrace(fr *trace.FlightRecorder, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := fr.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop unhooks and stops the recorder, after any trace being written.
func (t *stallTracer) stop() {
	if t == nil {
		return
	}
	udpmux.OnStall(nil)
	t.mu.Lock()
	fr := t.fr
	t.fr = nil // a stall from now on starts no write
	t.mu.Unlock()
	t.wg.Wait()
	fr.Stop()
}
