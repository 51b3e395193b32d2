package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// intLists parses several lists of positive counts (steps) by name,
// printing why not and returning false on failure.
func intLists(cmd string, lists map[string]string, stderr io.Writer) (map[string][]int, bool) {
	out := map[string][]int{}
	for name, list := range lists {
		ns, err := positiveInts(list)
		if err != nil {
			fmt.Fprintf(stderr, "convene-bench %s: bad steps for %s: %v\n", cmd, name, err)
			return nil, false
		}
		out[name] = ns
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
