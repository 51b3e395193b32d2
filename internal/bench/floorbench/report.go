package floorbench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The seed's figures and our targets, in milliseconds.
const (
	seedTransferMS = 0.96
	seedCreateMS   = 4.5
	targetP50MS    = 0.2
	targetP99MS    = 1.0
	targetCreateMS = 1.0
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// Table renders the result as Markdown.
func Table(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| measure | n | p50 ms | p90 ms | p99 ms | max ms | mean ms | seed (MCP kernel) | target | |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	row := func(name string, s Stats, seed string, target string, ok bool) {
		fmt.Fprintf(&b, "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s | %s |\n",
			name, s.N, s.P50, s.P90, s.P99, s.Max, s.Mean, seed, target, verdict(ok))
	}
	row("floor request → grant (WebSocket)", r.Grant, "—", "p50 < 0.2, p99 < 1",
		r.Grant.P50 < targetP50MS && r.Grant.P99 < targetP99MS)
	row("floor handover: release → other's grant", r.Handover, fmt.Sprintf("%.2f per transfer", seedTransferMS),
		"p50 < 0.2, p99 < 1", r.Handover.P50 < targetP50MS && r.Handover.P99 < targetP99MS)
	row("session create (REST, catalog write)", r.Create, fmt.Sprintf("%.1f conversation create", seedCreateMS),
		"< 1 (p50)", r.Create.P50 < targetCreateMS)
	fmt.Fprintf(&b, "\nMachine during the run: %.0f %% busy, %.0f %% stolen by the hypervisor (all CPUs, all processes).\n",
		r.Machine.BusyPct, r.Machine.StealPct)
	return b.String()
}

// Write stores <dir>/<date>-floor.md and .json and returns the .md path.
func Write(dir string, r Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	stem := filepath.Join(dir, r.Date.Format("2006-01-02-150405")+"-floor")
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(stem+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	md := fmt.Sprintf(`# Floor control and session service — %s

One `+"`convene serve`"+` process on loopback (host %s, %d CPUs), driven by
`+"`convene-bench floor`"+` (internal/bench/floorbench): two members with event
WebSockets on one session whose audio floor is floor_control/auto. Latency is
from the client's send to the client's read of the event frame.

%s
Seed: mcp-multimedia-protocol-suite-bsd-kernel.txt (token transfer 0.96 ms,
conversation create 4.5 ms, in a BSD kernel on its 1990s hardware).
`, r.Date.Format("2006-01-02 15:04:05 UTC"), r.Host, r.CPUs, Table(r))
	return stem + ".md", os.WriteFile(stem+".md", []byte(md), 0o644)
}

// Print writes the table.
func Print(w io.Writer, r Result) { fmt.Fprint(w, Table(r)) }
