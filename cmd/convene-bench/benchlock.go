package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
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

// benchRun is what a benchmark command holds while it runs: the lock, the
// scratch directory and the context that SIGINT or SIGTERM ends.
type benchRun struct {
	ctx  context.Context
	tmp  string
	done func()
}

// startBench takes the lock, makes the directories and the context; it
// prints why not and returns nil on failure. Call done at the end.
func startBench(cmd, out string, wait bool, stderr io.Writer) *benchRun {
	lock := lockBench(cmd, wait, stderr)
	if lock == nil {
		return nil
	}
	tmp := benchDirs(cmd, out, stderr)
	if tmp == "" {
		lock.Close()
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return &benchRun{ctx: ctx, tmp: tmp, done: func() {
		stop()
		os.RemoveAll(tmp)
		lock.Close()
	}}
}
