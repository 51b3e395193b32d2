package sip

import (
	"log/slog"
	"os"
	"testing"
)

// testLogger logs through t.Log; SIP_TEST_LOG=debug shows everything.
func testLogger(t testing.TB) *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("SIP_TEST_LOG") == "debug" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: lvl}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
