package sip

import (
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
)

// testLogger logs through t.Log until the test's cleanup; sipgo's
// goroutines may still log after that, and are dropped.
// SIP_TEST_LOG=debug shows everything.
func testLogger(t testing.TB) *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("SIP_TEST_LOG") == "debug" {
		lvl = slog.LevelDebug
	}
	w := &tWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

type tWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(p))
	}
	return len(p), nil
}
