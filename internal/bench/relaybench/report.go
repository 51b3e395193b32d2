package relaybench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func (res *Result) system(name string) *SystemResult {
	for i := range res.Systems {
		if res.Systems[i].Name == name {
			return &res.Systems[i]
		}
	}
	return nil
}

func (s *SystemResult) size(n int) *SizePoint {
	if s == nil {
		return nil
	}
	for i := range s.Sizes {
		if s.Sizes[i].Size == n {
			return &s.Sizes[i]
		}
	}
	return nil
}

// FormatTables renders the run as Markdown tables.
func FormatTables(res *Result) string {
	var b strings.Builder
	measured := false
	for _, s := range res.Systems {
		measured = measured || len(s.Sizes) > 0
	}
	names := []string{}
	for _, s := range res.Systems {
		names = append(names, s.Name)
	}
	if measured {
		sizesTable(&b, res, names)
	}
	b.WriteString("\n**Concurrent G.711 calls at zero loss (172-byte packets every 20 ms, both directions)**\n\n")
	b.WriteString("| System | Calls | Packets/s through the relay | × probe (172 B) | Steps |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range res.Systems {
		if s.Error != "" {
			fmt.Fprintf(&b, "| %s | not run: %s | | | |\n", s.Name, oneLine(s.Error))
			continue
		}
		pps := float64(s.MaxCalls) * 2 * float64(callMeasureRate)
		x := ""
		if p := res.probe(172); p > 0 {
			x = fmt.Sprintf("%.2f", pps/p)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %d |\n", s.Name, s.MaxCalls, num(pps), x, len(s.Steps))
	}
	b.WriteString("\nSeed Table 4: 3,524 G.729 calls per relay at best (100 ms packets); 1,332 at 20 ms.\n")
	for _, s := range res.Systems {
		if len(s.RateSteps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n**%s: throughput search**\n\n| Packet size (B) | Asked pkt/s | Sent pkt/s | Delivered pkt/s | Loss (%%) | Generator lag (ms) | Relay CPU (%%) | Pass |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n", s.Name)
		for _, st := range s.RateSteps {
			fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.0f | %.3f | %.1f | %.0f | %v |\n", st.Size, st.Rate, st.SentPPS, st.DeliveredPPS,
				st.LossPct, st.LagMs, st.CPUPercent, map[bool]string{true: "pass", false: "FAIL"}[st.Pass]+
					map[bool]string{true: " (measured again)", false: ""}[st.Retry])
		}
	}
	for _, s := range res.Systems {
		if len(s.Steps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n**%s: calls bisection**\n\n| Calls | Sent | Received | Misrouted | Loss (%%) | Generator lag (ms) | Relay CPU (%%) | Setup (ms) | Pass |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", s.Name)
		for _, st := range s.Steps {
			pass := "pass"
			if !st.Pass {
				pass = "FAIL"
				if st.Error != "" {
					pass += ": " + oneLine(st.Error)
				}
			}
			fmt.Fprintf(&b, "| %d | %d | %d | %d | %.3f | %.1f | %.0f | %.0f | %s |\n", st.Calls, st.Sent, st.Received, st.Misrouted,
				st.LossPct, st.LagMs, st.CPUPercent, st.SetupMs, pass)
		}
	}
	return b.String()
}

// callMeasureRate is packets per second per direction of a G.711 call.
const callMeasureRate = int(1e9 / int64(callInterval))

func num(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// WriteReport writes <dir>/<date>-relay.md and .json.
func WriteReport(dir string, res *Result) (md, js string, err error) {
	stamp := res.Start.Format("2006-01-02-150405")
	md = filepath.Join(dir, stamp+"-relay.md")
	js = filepath.Join(dir, stamp+"-relay.json")
	var b strings.Builder
	fmt.Fprintf(&b, "# Convene RTP relay benchmark, %s\n\n", res.Start.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&b, "- Date: %s to %s (%s)\n", res.Start.Format("2006-01-02T15:04:05Z"), res.End.Format("15:04:05Z"),
		res.End.Sub(res.Start).Round(1e9))
	fmt.Fprintf(&b, "- Host: %s, %d logical CPUs; load generator, probe and relay share them\n", res.Host, res.CPUs)
	for _, s := range res.Systems {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Version)
	}
	b.WriteString("- Seed: sip-voip-server-performance-enhancement, Table 2 (RTP-Relay maximum throughput, UDP) and Table 4 (calls)\n")
	b.WriteString("- Method: `convene-bench relay`; both relays are separate processes on 127.0.0.1 driven over the ng protocol " +
		"(offer/answer/delete) by the same code; rtpengine forwards in userspace (`--table=-1`). Endpoints are UDP sockets " +
		"on 127.0.0.2 (callers) and 127.0.0.3 (callees). Packets enter through a raw socket in sendmmsg batches (each with its endpoint's source address) and are received on the endpoints' sockets with epoll and recvmmsg. Probe: bench/probe/probe.c, one sendmmsg thread to 64 receivers.\n\n")
	if len(res.Probe) > 0 {
		b.WriteString("## Probe\n\n| Packet size (B) | Subscribers | Delivered pkt/s | Sent pkt/s | Delivered through the probe's relay pkt/s |\n| --- | --- | --- | --- | --- |\n")
		for _, p := range res.Probe {
			fmt.Fprintf(&b, "| %d | %d | %.0f | %.0f | %.0f |\n", p.Size, p.Subscribers, p.DeliveredPPS, p.SentPPS, p.RelayPPS)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Results\n\n" + FormatTables(res))
	if len(res.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range res.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	if err := os.WriteFile(md, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", "", err
	}
	return md, js, os.WriteFile(js, append(data, '\n'), 0o644)
}

// sizesTable writes the throughput table, one row per packet size.
func sizesTable(b *strings.Builder, res *Result, names []string) {
	fmt.Fprintf(b, "**Relay packets/s by packet size (layout of seed Table 2): the highest rate relayed with at most 0.1 %% loss, "+
		"%d flows (%d calls, both directions)**\n\n", flows, flows/2)
	b.WriteString("| Packet size (B) | Datagram (B) | Probe pkt/s | Relay probe pkt/s |")
	sep := "| --- | --- | --- | --- |"
	for _, n := range names {
		fmt.Fprintf(b, " %s pkt/s | %s × probe | %s × relay probe | %s CPU (%%) |", n, n, n, n)
		sep += " --- | --- | --- | --- |"
	}
	b.WriteString(" Seed UDP pkt/s |\n" + sep + " --- |\n")
	sizes := DefaultSizes
	if len(res.Systems) > 0 && len(res.Systems[0].Sizes) > 0 {
		sizes = nil
		for _, p := range res.Systems[0].Sizes {
			sizes = append(sizes, p.Size)
		}
	}
	for _, size := range sizes {
		fmt.Fprintf(b, "| %d | %d | %s | %s |", size, max(size, 12), num(res.probe(size)), num(res.relayProbe(size)))
		for _, n := range names {
			p := res.system(n).size(size)
			if p == nil || p.Error != "" {
				b.WriteString(" – | – | – | – |")
				continue
			}
			fmt.Fprintf(b, " %s | %.2f | %.2f | %.0f |", num(p.DeliveredPPS), p.XProbe, p.XRelayProbe, p.CPUPercent)
		}
		fmt.Fprintf(b, " %s |\n", num(SeedUDPPPS[size]))
	}

}
