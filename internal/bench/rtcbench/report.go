package rtcbench

import (
	"fmt"
	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
	"strconv"
	"strings"
)

// LiveKitPPSPerCore is LiveKit's published SRTP egress per vCPU, the
// issue's target for ours.
const LiveKitPPSPerCore = 75_000

// Format renders the run as Markdown.
func Format(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# WebRTC forwarding, %s\n\n", res.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "One publisher, N subscribers over DTLS-SRTP on loopback, the subscribers in their own process (pion); %d CPUs; each step measured over %s. "+
		"A step passes when every subscriber joined, loss < %.0f%% and one-way latency p95 < %d ms.\n\n", res.CPUs, res.Window, MaxLoss*100, MaxP95ms)
	for _, sc := range []string{"audio", "av"} {
		var ss []Series
		for _, s := range res.Series {
			if s.Scenario == sc {
				ss = append(ss, s)
			}
		}
		if len(ss) == 0 {
			continue
		}
		title := map[string]string{"audio": "Audio (Opus, 50 packets/s)", "av": "Audio and simulcast video (VP8 layers ~100/300/900 kbit/s)"}[sc]
		fmt.Fprintf(&b, "## %s\n\n", title)
		fmt.Fprintf(&b, "| system | subscribers | joined | loss | latency p50 / p95 / p99 ms | node's own delay p95 ms | server CPU (cores) | CPU ms/s per subscriber | SRTP packets/s per core | machine busy | join p50 ms | pass |\n")
		fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, s := range ss {
			for _, p := range s.Points {
				n := strconv.Itoa(p.N)
				if p.Retry {
					n += " (again)"
				}
				loss := fmt.Sprintf("%.2f%%", 100*p.Load.Loss)
				if p.Load.Lossy > 0 {
					loss += fmt.Sprintf(" (%d over 1%%)", p.Load.Lossy)
				}
				own := convene.BoundMs(p.NodeDelayP95)
				fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f / %.1f / %.1f | %s | %.2f | %.2f | %.0f | %.0f%% | %.0f | %s |\n", s.System, n, p.Load.Joined,
					loss, p.Load.LatP50, p.Load.LatP95, p.Load.LatP99, own, p.CPU, p.CPUPerSub, p.PPSPerCore, p.MachineBusy, p.Load.JoinP50, results.Pass(p.OK))
			}
		}
		b.WriteString("\n")
		for _, s := range ss {
			fmt.Fprintf(&b, "- %s (%s): %d subscribers at the quality bar", s.System, s.Version, s.MaxOK)
			if s.Note != "" {
				fmt.Fprintf(&b, " — %s", s.Note)
			}
			b.WriteString("\n")
		}
		if c, j := find(ss, "convene"), find(ss, "janus"); c != nil && j != nil && j.MaxOK > 0 {
			fmt.Fprintf(&b, "- Convene / Janus subscribers: **%.2f×** (target 1.5×)\n", float64(c.MaxOK)/float64(j.MaxOK))
		}
		if c := find(ss, "convene"); c != nil {
			// Only a step at the bar counts: a step whose subscribers lost
			// packets or got them late is no egress a user would take.
			best, all := 0.0, 0.0
			for _, p := range c.Points {
				all = max(all, p.PPSPerCore)
				if p.OK {
					best = max(best, p.PPSPerCore)
				}
			}
			fmt.Fprintf(&b, "- Convene SRTP egress at the quality bar: up to **%.0f packets/s per core** (LiveKit's published figure: %d)", best, LiveKitPPSPerCore)
			if all > best {
				fmt.Fprintf(&b, "; %.0f in a step that missed the bar, not counted", all)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("\"node's own delay\" is Convene's convene_webrtc_forward_delay_seconds over the window (a packet queued for a subscriber until sent), as the upper bound of its histogram bucket: latency beyond it is spent outside the node (the kernel, the load process).\n\n")
	if res.Pinned {
		fmt.Fprintf(&b, "Each server ran on CPU %d alone (taskset); the load process and the publisher on the other CPUs, so a server's count is what one core of its own serves, not what the load process leaves it. \"server CPU\" above 1 core cannot happen; \"machine busy\" covers both.\n\n", proc.ServerCPU)
	} else {
		b.WriteString("The subscribers' load process shares the machine with the server: where the machine is near 100% busy, latency and loss are the load process's as much as the server's.\n\n")
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func find(ss []Series, name string) *Series {
	for i := range ss {
		if ss[i].System == name {
			return &ss[i]
		}
	}
	return nil
}

// Write saves <dir>/<date>-webrtc.md and .json and returns the .md path.
func Write(dir string, res Result) (string, error) {
	return results.Write(dir, res.Date, "webrtc", res, Format(res))
}
