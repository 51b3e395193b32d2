package chatbench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The seed's figures (mcp-multimedia-protocol-suite-bsd-kernel), in ms.
const (
	seedCreateMS   = 4.5
	seedTransferMS = 0.96
)

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// top is the series' last point that passed, or nil.
func (s Series) top() *Point {
	for i := len(s.Points) - 1; i >= 0; i-- {
		if s.Points[i].OK {
			return &s.Points[i]
		}
	}
	return nil
}

// Format renders the result as Markdown.
func Format(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Through the node\n\nA step passes when every accepted message reached every other member of its session (missing: deliveries not read within %s of the last send), none was refused, no socket was hung up, end-to-end p99 < %d ms and the members sent ≥ %.0f %% of the offered messages. End-to-end latency in ms, ordering (delivery − arrival in the receiver) in µs; per core is per CPU second of the node.\n",
		r.Drain, maxP99.Milliseconds(), 100*keptUp)
	for _, s := range r.Series {
		fmt.Fprintf(&b, "\n### Sessions of %d members\n\n", s.Members)
		b.WriteString("| offered msg/s | sessions | msg/s a member | accepted msg/s | deliveries/s | e2e p50 ms | e2e p99 ms | ordering p50 µs | ordering p99 µs | missing | refused | node cores | msg/s a core | deliveries/s a core | context B/msg | machine busy / steal % | pass |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, p := range s.Points {
			pass := yes(p.OK)
			if !p.OK {
				pass += " (" + p.Why + ")"
			}
			fmt.Fprintf(&b, "| %d | %d | %.1f | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %d | %d | %.2f | %.0f | %.0f | %.1f | %.0f / %.0f | %s |\n",
				p.Offered, p.Sessions, p.PerMember, p.Accepted, p.Deliveries, p.E2E.P50, p.E2E.P99, 1000*p.Order.P50, 1000*p.Order.P99,
				p.Lost, p.Refused, p.CPU, p.MsgsPerCore, p.DeliveriesPerCore, p.Context, p.MachineBusy, p.Steal, pass)
		}
		if t := s.top(); t != nil {
			fmt.Fprintf(&b, "\nHighest passing rate: **%d msg/s** (%.0f deliveries/s); there the node did %.0f messages and %.0f deliveries a second per core.",
				s.MaxOK, t.Deliveries, t.MsgsPerCore, t.DeliveriesPerCore)
			if t.Profile != "" {
				fmt.Fprintf(&b, " CPU profile of the node at that step: `%s` (not committed)", t.Profile)
				if len(t.Where) > 0 {
					fmt.Fprintf(&b, "; its samples: %s", shares(t.Where))
				}
				b.WriteString(".")
			}
			b.WriteString("\n")
		} else {
			b.WriteString("\nNo step passed.\n")
		}
		if s.Note != "" {
			fmt.Fprintf(&b, "\nNote: %s\n", s.Note)
		}
	}
	b.WriteString("\n## Beside the seed\n\n| measure | ours p50 | ours p99 | seed (MCP kernel) |\n|---|---:|---:|---|\n")
	for _, s := range r.Series {
		fmt.Fprintf(&b, "| conversation join, sessions of %d (dial → hello, the member numbered in the catalog; n = %d) | %.3f | %.3f | %.1f conversation create |\n",
			s.Members, s.Joins.N, s.Joins.P50, s.Joins.P99, seedCreateMS)
	}
	if f := r.Floor; f != nil {
		fmt.Fprintf(&b, "| floor request → grant (%s) | %.3f | %.3f | — |\n", f.Report, f.Grant.P50, f.Grant.P99)
		fmt.Fprintf(&b, "| floor handover: release → other's grant (%s) | %.3f | %.3f | %.2f token transfer |\n", f.Report, f.Handover.P50, f.Handover.P99, seedTransferMS)
	} else {
		fmt.Fprintf(&b, "| floor token transfer | — | — | %.2f (no floor report in the output directory: run `convene-bench floor`) |\n", seedTransferMS)
	}
	for _, s := range r.Series {
		if t := s.top(); t != nil {
			fmt.Fprintf(&b, "| latency added by ordering, sessions of %d at %d msg/s (delivery − arrival in each receiver), **in µs** | %.0f µs | %.0f µs | — |\n",
				s.Members, t.Offered, 1000*t.Order.P50, 1000*t.Order.P99)
		}
	}
	b.WriteString("\nBytes of context per message against 10, 100 and 1,000 members, and the hold ordering adds under the seed's 20–500 ms delay and 1 % loss, are simulated by `make microbench` (BenchmarkContextSize, BenchmarkOrderingHold in internal/conversation); the live runs above give the context bytes of a chat through the node, where it is in the table.\n")
	return b.String()
}

// Write stores <dir>/<date>-chat.md and .json and returns the .md path.
func Write(dir string, r Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	stem := filepath.Join(dir, r.Date.Format("2006-01-02-150405")+"-chat")
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(stem+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	pinned := "the node and the members shared the machine's CPUs"
	if r.Pinned {
		pinned = "the node alone on CPU 0, the members on the others"
	}
	var notes strings.Builder
	for _, n := range r.Notes {
		fmt.Fprintf(&notes, "- %s\n", n)
	}
	if notes.Len() > 0 {
		notes.WriteString("\n")
	}
	md := fmt.Sprintf(`# Conversations through the node — %s

One `+"`convene serve`"+` (%s) on loopback (host %s, %d CPUs; %s), driven by `+"`convene-bench chat`"+`
(internal/bench/chatbench): every member a Go client (package conversation's
Participant) on its own conversation WebSocket, sending chat lines of %d
bytes at most %.0f a second (the node's cap a socket is 100), each step %s.
A message's payload carries its send time; its latency is to each other
member's socket read.

%s%s
Seed: mcp-multimedia-protocol-suite-bsd-kernel.txt (conversation create
4.5 ms, token transfer 0.96 ms, in a BSD kernel on its 1990s hardware).
`, r.Date.Format("2006-01-02 15:04:05 UTC"), r.Version, r.Host, r.CPUs, pinned, r.Size, r.Rate, r.Window, notes.String(), Format(r))
	return stem + ".md", os.WriteFile(stem+".md", []byte(md), 0o644)
}
