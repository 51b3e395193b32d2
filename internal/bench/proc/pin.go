package proc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// ServerCPU is the CPU a measured server gets to itself when a benchmark
// pins: the load runs on the others, so that on a small machine the load's
// cost does not decide how much a server serves.
const ServerCPU = 0

// PinSelf moves every thread of this process (and so the processes it
// starts) off the server's CPU, and runs no more goroutines at once than
// the CPUs left: the runtime took GOMAXPROCS from the CPUs it saw at
// start and does not look again, and a P more than there are CPUs only
// spins (in findRunnable, in a mutex's spin) on the CPU another needs.
func PinSelf() error {
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("pinning needs 2 CPUs, this machine has %d", runtime.NumCPU())
	}
	var set unix.CPUSet
	for c := range runtime.NumCPU() {
		if c != ServerCPU {
			set.Set(c)
		}
	}
	err := eachThread(func(tid int) error {
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
		return nil
	})
	if err == nil {
		runtime.GOMAXPROCS(set.Count())
	}
	return err
}

// NiceSelf gives every thread of this process (and so the threads and
// processes it starts) niceness n; a negative n needs root. A benchmark
// whose load runs in its own process gives it the servers' niceness, so
// that other work on a shared machine does not stall the load and show as
// the server's latency.
func NiceSelf(n int) error {
	return eachThread(func(tid int) error {
		// Linux keeps a niceness per thread: PRIO_PROCESS of a thread ID.
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil {
			return fmt.Errorf("nice thread %d: %w", tid, err)
		}
		return nil
	})
}

// eachThread calls f with the ID of every thread of this process.
func eachThread(f func(tid int) error) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := f(tid); err != nil {
			return err
		}
	}
	return nil
}

// OnServerCPU makes cmd start on the server's CPU alone (through taskset,
// which keeps the PID).
func OnServerCPU(cmd *exec.Cmd) {
	path, err := exec.LookPath("taskset")
	if err != nil {
		return
	}
	cmd.Args = append([]string{"taskset", "-c", strconv.Itoa(ServerCPU)}, cmd.Args...)
	cmd.Path = path
}

// Nice makes cmd start at niceness n (through nice, which keeps the PID);
// a negative n needs root. A benchmark on a machine shared with other work
// gives every server it compares the same niceness, so that the others'
// processes take less of the server's CPU, and no server more than
// another for having more threads.
func Nice(cmd *exec.Cmd, n int) {
	path, err := exec.LookPath("nice")
	if err != nil || n == 0 {
		return
	}
	cmd.Args = append([]string{"nice", "-n", strconv.Itoa(n)}, cmd.Args...)
	cmd.Path = path
}
