package mediabench

import (
	"os"
	"runtime"
	"time"

	"github.com/convene/convene/internal/bench/proc"
)

// Usage is the CPU a step used, over its window.
type Usage struct {
	// CPU is the measured system's, in cores: the node with its ffmpeg
	// children, or the peer's processes.
	CPU float64 `json:"cpu_cores"`
	// LoadCPU is this process's (the cameras, receivers, viewers), in cores.
	LoadCPU float64 `json:"load_cpu_cores"`
	// MachineBusy and Steal are the machine's shares, in percent.
	MachineBusy float64 `json:"machine_busy_pct"`
	Steal       float64 `json:"steal_pct"`
	// Others is the CPU, in cores, that neither the system nor the load
	// used: other work on a shared machine.
	Others float64 `json:"others_cores"`
}

// meter samples a system's CPU seconds (cpu), this process's and the
// machine's; Since turns two samples into a Usage.
type meter struct {
	sys, self float64
	m         proc.CPU
	at        time.Time
}

func sample(cpu func() float64) meter {
	_, self, _ := proc.Process(os.Getpid())
	m, _ := proc.ReadCPU()
	return meter{sys: cpu(), self: self, m: m, at: time.Now()}
}

func (b meter) since(a meter) Usage {
	var u Usage
	el := b.at.Sub(a.at).Seconds()
	if el <= 0 {
		return u
	}
	u.CPU = (b.sys - a.sys) / el
	u.LoadCPU = (b.self - a.self) / el
	u.MachineBusy, u.Steal = b.m.Since(a.m)
	u.Others = max(0, u.MachineBusy/100*float64(runtime.NumCPU())-u.CPU-u.LoadCPU)
	return u
}

// pidsCPU is the CPU seconds of processes (a peer's), and of their
// direct children.
func pidsCPU(pids func() []int) func() float64 {
	return func() float64 {
		t := 0.0
		for _, p := range pids() {
			t += proc.TreeCPU(p)
		}
		return t
	}
}
