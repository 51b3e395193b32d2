package rtcbench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// serverCPU is the CPU the measured server gets to itself when a run pins
// (Config.Pin): the load process and the publisher run on the others, so
// that on a small machine the load process's cost does not decide how many
// subscribers a server serves.
const serverCPU = 0

// pinSelf moves every thread of this process (and so the processes it
// starts) off the server's CPU.
func pinSelf() error {
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("pinning needs 2 CPUs, this machine has %d", runtime.NumCPU())
	}
	var set unix.CPUSet
	for c := range runtime.NumCPU() {
		if c != serverCPU {
			set.Set(c)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
	}
	return nil
}

// onServerCPU makes cmd start on the server's CPU alone (through taskset,
// which keeps the PID).
func onServerCPU(cmd *exec.Cmd) {
	path, err := exec.LookPath("taskset")
	if err != nil {
		return
	}
	cmd.Args = append([]string{"taskset", "-c", strconv.Itoa(serverCPU)}, cmd.Args...)
	cmd.Path = path
}
