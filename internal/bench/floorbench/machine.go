package floorbench

import (
	"os"
	"strconv"
	"strings"
)

// cpuTimes are the machine's CPU jiffies from /proc/stat (Linux; zero
// elsewhere): the run's busy and stolen share says how much the rest of
// the machine took from it.
type cpuTimes struct{ total, idle, steal uint64 }

func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		t.total += v
		switch i {
		case 3, 4: // idle, iowait
			t.idle += v
		case 7:
			t.steal = v
		}
	}
	return t
}

// Machine is what the machine did during the run, in percent of all CPUs.
type Machine struct {
	BusyPct  float64 `json:"busy_pct"`
	StealPct float64 `json:"steal_pct"`
}

func machineSince(a cpuTimes) Machine {
	b := readCPU()
	d := float64(b.total - a.total)
	if d <= 0 {
		return Machine{}
	}
	return Machine{BusyPct: 100 * (d - float64(b.idle-a.idle)) / d, StealPct: 100 * float64(b.steal-a.steal) / d}
}
