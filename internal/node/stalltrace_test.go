package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A stall writes the flight recorder's trace once; a second stall within
// stallEvery writes nothing more.
func TestStallTraceWritesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stalls")
	tr, err := startStallTrace(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	busy := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(busy) { // something to trace
		_ = make([]byte, 1024)
	}
	tr.stall(150 * time.Millisecond)
	tr.stall(300 * time.Millisecond)
	tr.stop()
	files, err := filepath.Glob(filepath.Join(dir, "stall-*-150ms.trace"))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := os.ReadDir(dir)
	if len(files) != 1 || len(all) != 1 {
		t.Fatalf("stall traces %v, directory holds %d files; want one, of the first stall", files, len(all))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1024 {
		t.Fatalf("%s: %d bytes, header %q: not an execution trace", files[0], len(b), b[:min(len(b), 16)])
	}
}

func TestStallTraceOff(t *testing.T) {
	tr, err := startStallTrace("", nil)
	if tr != nil || err != nil {
		t.Fatalf("no directory: tracer %v, err %v", tr, err)
	}
	tr.stop() // a nil tracer stops
}
