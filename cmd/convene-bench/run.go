package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/convene/convene/internal/bench/loadgen"
)

// benchRun is what a benchmark of servers beside their peers holds while it
// runs: the benchmark lock, a scratch directory, and a context that SIGINT
// and SIGTERM cancel. end releases them.
type benchRun struct {
	ctx  context.Context
	tmp  string
	stop []func()
}

// begin takes the lock (see lockBench), raises the file limit (thousands
// of sockets; the servers inherit it) and makes the report directory out
// and the scratch directory; nil after printing why not.
func begin(cmd, out string, wait bool, stderr io.Writer) *benchRun {
	lock := lockBench(cmd, wait, stderr)
	if lock == nil {
		return nil
	}
	_ = loadgen.FileLimit()
	tmp := benchDirs(cmd, out, stderr)
	if tmp == "" {
		lock.Close()
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return &benchRun{ctx: ctx, tmp: tmp, stop: []func(){func() { lock.Close() }, func() { os.RemoveAll(tmp) }, stop}}
}

func (b *benchRun) end() {
	for i := len(b.stop) - 1; i >= 0; i-- {
		b.stop[i]()
	}
}

// intList parses a comma-separated list of positive counts (a flag's),
// printing why not and returning false on failure.
func intList(cmd, list string, stderr io.Writer) ([]int, bool) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "convene-bench %s: bad step %q\n", cmd, f)
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// intLists parses several lists by name (see intList).
func intLists(cmd string, lists map[string]string, stderr io.Writer) (map[string][]int, bool) {
	out := map[string][]int{}
	for name, list := range lists {
		var ok bool
		if out[name], ok = intList(cmd, list, stderr); !ok {
			return nil, false
		}
	}
	return out, true
}

// report writes a benchmark's report (write) and prints it (format) with
// where it went, and returns the exit code. A run that failed writes
// nothing, except one interrupted (runErr is context.Canceled), whose
// steps so far are worth keeping: that one is written, and exits 1.
func report(cmd string, stdout, stderr io.Writer, runErr error, write func() (string, error), format func() string) int {
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, runErr)
		return 1
	}
	path, err := write()
	if err != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return 1
	}
	fmt.Fprint(stdout, format())
	fmt.Fprintln(stdout, "report:", path)
	if runErr != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, runErr)
		return 1
	}
	return 0
}
