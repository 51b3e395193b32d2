package floorbench

import "github.com/convene/convene/internal/bench/proc"

// Machine is what the machine did during the run, in percent of all CPUs:
// the busy and stolen share say how much the rest of the machine took
// from it.
type Machine struct {
	BusyPct  float64 `json:"busy_pct"`
	StealPct float64 `json:"steal_pct"`
}

// machineSince returns the machine's busy and stolen share since a (zeros
// when /proc/stat cannot be read).
func machineSince(a proc.CPU) Machine {
	b, err := proc.ReadCPU()
	if err != nil {
		return Machine{}
	}
	var m Machine
	m.BusyPct, m.StealPct = b.Since(a)
	return m
}
