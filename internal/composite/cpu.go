package composite

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times: 100 on every Linux Go runs on.
const clockTicks = 100

// cpuMeter measures a child's CPU in cores from /proc between samples.
type cpuMeter struct {
	pid   int
	ticks uint64
	at    time.Time
}

// sample returns the cores pid used since the last sample of the same
// pid (ok false at a new pid, or where /proc cannot tell).
func (m *cpuMeter) sample(pid int, now time.Time) (cores float64, ok bool) {
	ticks, err := procTicks(pid)
	if err != nil {
		m.pid = 0
		return 0, false
	}
	prevPID, prevTicks, prevAt := m.pid, m.ticks, m.at
	m.pid, m.ticks, m.at = pid, ticks, now
	if prevPID != pid || !now.After(prevAt) || ticks < prevTicks {
		return 0, false
	}
	return float64(ticks-prevTicks) / clockTicks / now.Sub(prevAt).Seconds(), true
}

// procTicks is a process's user + system CPU time in clock ticks (proc(5):
// fields 14 and 15 of /proc/<pid>/stat, counted after the command's ")").
func procTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, os.ErrInvalid
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, os.ErrInvalid
	}
	u, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, os.ErrInvalid
	}
	return u + s, nil
}
