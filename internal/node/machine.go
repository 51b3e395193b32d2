package node

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every Linux
// architecture Go supports).
const userHZ = 100

// machineBusySeconds reads /proc/stat: the CPU seconds the CPUs this
// process may run on (its affinity: taskset, a container's cpuset) have
// been busy since boot (user, nice, system, irq, softirq) plus what the
// hypervisor stole from them. The capacity governor takes away from the
// node's cores what others used there (capacity.Options.Machine).
func machineBusySeconds() (float64, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseCPUStat(f, set.IsSet)
}

// parseCPUStat sums the busy time of the CPUs of /proc/stat's "cpuN user
// nice system idle iowait irq softirq steal …" lines that mine accepts.
func parseCPUStat(r io.Reader, mine func(cpu int) bool) (float64, error) {
	sc := bufio.NewScanner(r)
	var busy uint64
	cpus := 0
	for sc.Scan() {
		fs := bytes.Fields(sc.Bytes())
		if len(fs) == 0 || !bytes.HasPrefix(fs[0], []byte("cpu")) || len(fs[0]) == 3 {
			continue // another line, or the machine's total
		}
		n, err := strconv.Atoi(string(fs[0][3:]))
		if err != nil || !mine(n) {
			continue
		}
		if len(fs) < 9 {
			return 0, errors.New("/proc/stat: short cpu line")
		}
		for i, f := range fs[1:9] {
			v, err := strconv.ParseUint(string(f), 10, 64)
			if err != nil {
				return 0, errors.New("/proc/stat: " + err.Error())
			}
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		cpus++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if cpus == 0 {
		return 0, errors.New("/proc/stat: none of this process's CPUs")
	}
	return float64(busy) / userHZ, nil
}
