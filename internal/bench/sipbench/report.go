package sipbench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Report is what a run found.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  string    `json:"machine"`
	Point    string    `json:"point_duration"`
	Users    int       `json:"users"`
	Results  []Result  `json:"results"`
}

func machine() string {
	s := fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	for _, v := range [][]string{{"sipp", "-v"}, {"kamailio", "-v"}} {
		out, err := exec.Command(v[0], v[1:]...).CombinedOutput()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			if strings.Contains(l, "SIPp v") || strings.HasPrefix(l, "version: kamailio") {
				s += "; " + l
				break
			}
		}
	}
	return s
}

func (r *Report) result(system, workload string) *Result {
	for i := range r.Results {
		if r.Results[i].System == system && r.Results[i].Workload == workload {
			return &r.Results[i]
		}
	}
	return nil
}

// WriteTable prints the comparison table in Markdown.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "| workload | unit | Convene | Kamailio | target | Convene vs Kamailio |\n|---|---|---:|---:|---:|---:|\n")
	for _, wl := range Workloads {
		c, k := r.result("Convene", wl.Name), r.result("Kamailio", wl.Name)
		if c == nil && k == nil {
			continue
		}
		cv, kv := rate(c), rate(k)
		ratio := "-"
		if c != nil && k != nil && k.Max > 0 {
			ratio = fmt.Sprintf("%.2f×", c.Max/k.Max)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | ≥ %.0f and ≥ Kamailio | %s |\n", wl.Name, wl.Unit, cv, kv, wl.Target, ratio)
	}
	fmt.Fprintf(w, "\nSIPp response times at the highest clean point (ms, average ± standard deviation; "+
		"RTD 1 = challenge or INVITE→200, RTD 2 = authenticated REGISTER or BYE→200), and the server's CPU use "+
		"(cores busy, of %d):\n\n", runtime.NumCPU())
	fmt.Fprintf(w, "| workload | system | rate | RTD 1 | RTD 2 | server CPU |\n|---|---|---:|---:|---:|---:|\n")
	for _, wl := range Workloads {
		for _, sys := range []string{"Convene", "Kamailio"} {
			res := r.result(sys, wl.Name)
			if res == nil || res.Best == nil {
				continue
			}
			p := res.Best
			fmt.Fprintf(w, "| %s | %s | %.0f | %.2f ± %.2f | %.2f ± %.2f | %.2f |\n", wl.Name, sys, p.Achieved,
				p.Stats.RT1Avg, p.Stats.RT1Std, p.Stats.RT2Avg, p.Stats.RT2Std, p.CPU)
		}
	}
	var notes []string
	for _, res := range r.Results {
		if res.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s %s: %s", res.System, res.Workload, firstLine(res.Note)))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func rate(r *Result) string {
	switch {
	case r == nil:
		return "-"
	case r.Max == 0:
		return "no clean point"
	}
	return fmt.Sprintf("%.0f", r.Max)
}

const method = `Method: each workload runs on Convene (` + "`convene serve`" + `, the whole node, SIP rate limits and
contact probing off, INVITEs not challenged, SDP rewritten through the node's RTP relay) and on Kamailio
(bench/kamailio/kamailio.cfg; 2 UDP workers for registrations, 8 for calls, where its workers wait in tm
and 2 collapsed at 2,100-2,500 calls/s; stateless registrar, usrloc in memory, record-routing stateful
proxy with a usrloc lookup, no media relay), one after the other on the same machine, driven by SIPp over UDP on
loopback. Before the registration workloads every user registers once (warm-up). SIPp runs a fixed call
rate for one point; a point is clean when every call succeeded with no
retransmission; a point that is not clean is measured once more at the same rate on a fresh server (both
systems alike) and the second one stands. The rate grows by half until a point is not clean, then is bisected; the table shows the
highest clean rate SIPp achieved. SIPp shares the machine's cores with the server; its socket buffers are
4 MiB (-buff_size, capped by net.core.rmem_max), since with its default 64 KiB the kernel drops answers at
SIPp's own socket while SIPp is busy. "UDP drops" counts datagrams the kernel dropped at any full socket
during the point (Udp RcvbufErrors).`

func (r *Report) write(dir, stamp string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# SIP benchmark %s\n\nMachine: %s. Point: %s. Users: %d. Run took %s.\n\n",
		r.Started.Format(time.RFC3339), r.Machine, r.Point, r.Users, r.Finished.Sub(r.Started).Round(time.Second))
	r.WriteTable(&md)
	fmt.Fprintf(&md, "\n%s\n\nAll points:\n\n| system | workload | offered | achieved | failed | retrans | UDP drops | CPU | clean |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n", method)
	for _, res := range r.Results {
		for _, p := range res.Points {
			clean := fmt.Sprint(p.Clean)
			if p.Again {
				clean += " (measured again)"
			}
			fmt.Fprintf(&md, "| %s | %s | %.0f | %.0f | %d | %d | %d | %.2f | %s |\n", res.System, res.Workload, p.Rate, p.Achieved,
				p.Stats.Failed, p.Stats.Retrans, p.Drops, p.CPU, clean)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, stamp+"-sip.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stamp+"-sip.json"), js, 0o644)
}
