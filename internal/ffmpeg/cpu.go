package ffmpeg

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times: 100 on every Linux Go runs on.
const clockTicks = 100

// CPUMeter measures a child's CPU in cores from /proc between samples.
type CPUMeter struct {
	pid    int
	cpu    time.Duration
	at     time.Time
	smooth float64 // Smooth's last value
}

// Smooth samples pid and returns its load smoothed over the samples (0.8
// of the last value, 0.2 of the new sample), so a keyframe's spike is not
// taken for the child's load; ok false when the sample gave nothing.
func (m *CPUMeter) Smooth(pid int, now time.Time) (cores float64, ok bool) {
	c, ok := m.Sample(pid, now)
	if !ok {
		return m.smooth, false
	}
	if m.smooth > 0 {
		c = 0.8*m.smooth + 0.2*c
	}
	m.smooth = c
	return c, true
}

// Sample returns the cores pid used since the last sample of the same
// pid (ok false at a new pid, or where /proc cannot tell).
func (m *CPUMeter) Sample(pid int, now time.Time) (cores float64, ok bool) {
	cpu, err := CPUTime(pid)
	if err != nil {
		m.pid = 0
		return 0, false
	}
	prevPID, prevCPU, prevAt := m.pid, m.cpu, m.at
	m.pid, m.cpu, m.at = pid, cpu, now
	if prevPID != pid || !now.After(prevAt) || cpu < prevCPU {
		return 0, false
	}
	return (cpu - prevCPU).Seconds() / now.Sub(prevAt).Seconds(), true
}

// CPUTime is the user + system CPU time a process has used (proc(5):
// fields 14 and 15 of /proc/<pid>/stat, counted after the command's ")",
// in clock ticks).
func CPUTime(pid int) (time.Duration, error) {
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
	return time.Duration(u+s) * time.Second / clockTicks, nil
}
