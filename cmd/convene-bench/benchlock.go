package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/convene/convene/internal/bench/loadgen"
)

const benchLock = "/tmp/convene-bench.lock"

// lockBench takes the lock every benchmark subcommand holds while it runs,
// so that two never share the machine's cores. When another benchmark holds
// it, lockBench refuses with a clear message, or with wait queues behind it.
// It returns the lock's file (close it to release), or nil after printing
// why not.
func lockBench(cmd string, wait bool, stderr io.Writer) *os.File {
	lock, err := os.OpenFile(benchLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return nil
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if !wait {
			fmt.Fprintf(stderr, "convene-bench %s: another benchmark is running (it holds %s); wait for it to finish, or pass -wait\n", cmd, benchLock)
			lock.Close()
			return nil
		}
		fmt.Fprintf(stderr, "convene-bench %s: waiting for the benchmark holding %s to finish\n", cmd, benchLock)
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
			lock.Close()
			return nil
		}
	}
	return lock
}

// benchDirs makes the report directory out and a scratch directory for the
// run (the caller removes it), printing why not and returning "" on failure.
func benchDirs(cmd, out string, stderr io.Writer) string {
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return ""
	}
	tmp, err := os.MkdirTemp("", "convene-bench-"+cmd+"-")
	if err != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return ""
	}
	return tmp
}

// benchHold is what a benchmark holds while it runs: the lock, a scratch
// directory (Tmp) and a context (Ctx) that SIGINT or SIGTERM ends.
type benchHold struct {
	Tmp  string
	Ctx  context.Context
	lock *os.File
	stop context.CancelFunc
}

// holdBench takes the benchmark lock (see lockBench), raises the open-file
// limit (a benchmark's thousands of sockets; the servers it starts inherit
// it) and makes the report directory out and a scratch directory; nil
// after printing why not. The caller releases it when done.
func holdBench(cmd string, wait bool, out string, stderr io.Writer) *benchHold {
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
	return &benchHold{Tmp: tmp, Ctx: ctx, lock: lock, stop: stop}
}

// release ends the context, removes the scratch directory and gives the
// lock back.
func (h *benchHold) release() {
	h.stop()
	os.RemoveAll(h.Tmp)
	h.lock.Close()
}

// benchRun is the view of a benchHold the broker and overload commands
// take: its context, scratch directory and release.
type benchRun struct {
	ctx  context.Context
	tmp  string
	done func()
}

// startBench is holdBench for them; nil after printing why not.
func startBench(cmd, out string, wait bool, stderr io.Writer) *benchRun {
	h := holdBench(cmd, wait, out, stderr)
	if h == nil {
		return nil
	}
	return &benchRun{ctx: h.Ctx, tmp: h.Tmp, done: h.release}
}
