// Package proc is the benchmarks' one view of processes and of the
// machine: it stops the child processes they start (nodes, peers) by their
// PID, politely first, then for certain, and reads CPU times from /proc
// (the machine's busy and stolen share, a process's or a process tree's
// CPU seconds); it pins a measured server to a CPU of its own and the
// benchmark off it.
package proc

import (
	"os/exec"
	"syscall"
	"time"
)

// Stop sends cmd's process SIGTERM, waits up to grace for it to exit, then
// kills it, and returns once it has been reaped. A command that never
// started is left alone. Stop calls cmd.Wait, so the caller must not.
func Stop(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}
