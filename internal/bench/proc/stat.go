package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the kernel's CPU times in /proc (USER_HZ, 100 on
// every Linux architecture Convene builds for).
const userHZ = 100

// CPU is the machine's CPU time so far, in clock ticks, from the first line
// of /proc/stat: Busy is user, nice, system, irq and softirq; Steal is what
// the hypervisor gave to other guests; Total adds idle and iowait to both.
type CPU struct{ Total, Busy, Steal uint64 }

// ReadCPU reads the machine's CPU times.
func ReadCPU() (CPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPU(line)
}

// parseCPU reads /proc/stat's "cpu" line: cpu user nice system idle iowait
// irq softirq steal guest guest_nice. Guest time is already counted in user.
func parseCPU(line string) (CPU, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPU{}, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	var c CPU
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPU{}, fmt.Errorf("unexpected /proc/stat: %q: %w", line, err)
		}
		c.Total += v
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			c.Steal += v
		default:
			c.Busy += v
		}
	}
	return c, nil
}

// Since returns the busy and stolen shares of all CPU time between a and c,
// in percent; zeros when no time was counted in between.
func (c CPU) Since(a CPU) (busyPct, stealPct float64) {
	if c.Total <= a.Total {
		return 0, 0
	}
	all := float64(c.Total - a.Total)
	return 100 * float64(c.Busy-a.Busy) / all, 100 * float64(c.Steal-a.Steal) / all
}

// Process returns a process's parent and the user+system CPU seconds it has
// used, from /proc/PID/stat.
func Process(pid int) (ppid int, cpuSeconds float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseProcess(string(b))
}

// parseProcess reads a /proc/PID/stat line. The command name, in
// parentheses, may hold spaces and parentheses itself, so the fields are
// counted from the last ')': state ppid ... utime (14th) stime (15th).
func parseProcess(s string) (ppid int, cpuSeconds float64, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("unexpected /proc/PID/stat: %q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/PID/stat: %q", s)
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("unexpected /proc/PID/stat: %q", s)
	}
	return ppid, float64(ut+st) / userHZ, nil
}

// TreeCPU returns the CPU seconds used by the process root and its direct
// children (Kamailio's workers are children of its main process); 0 when
// root is gone.
func TreeCPU(root int) float64 {
	total := 0.0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, err := Process(pid); err == nil && (pid == root || ppid == root) {
			total += cpu
		}
	}
	return total
}
