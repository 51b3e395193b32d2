package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/floorbench"
)

// benchFloorCmd measures floor request→grant latency over WebSocket and
// session create latency against a real `convene serve` child process.
// Like every benchmark it holds the benchmark lock (see lockBench).
func benchFloorCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for <date>-floor.md and .json")
	iters := fs.Int("n", 2000, "floor requests and handovers measured")
	creates := fs.Int("creates", 500, "sessions created")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("floor", *server, stderr)
	if bin == "" {
		return 1
	}
	lock := lockBench("floor", *wait, stderr)
	if lock == nil {
		return 1
	}
	defer lock.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := floorbench.Run(ctx, floorbench.Options{Bin: bin, Iterations: *iters, Creates: *creates})
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench floor:", err)
		return 1
	}
	floorbench.Print(stdout, res)
	path, err := floorbench.Write(*out, res)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench floor:", err)
		return 1
	}
	fmt.Fprintln(stdout, "wrote", path)
	return 0
}
