package clusterbench

import (
	"fmt"
	"math"
	"strings"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/results"
)

// Format renders the run as Markdown.
func Format(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# A session across nodes (cluster), %s\n\n", res.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%s on %s, three routed nats-server processes (one per node) and PostgreSQL, all on this machine's %d CPUs. "+
		"R = %d sessions of M = %d members: one speaker (the seed's %d-byte audio every %s, plain RTP) and %d listeners (plain RTP), "+
		"member k of session r on node (r+k) mod N; \"hop\" puts every speaker on n1 and every listener on n2, \"fan\" every speaker on n1 and the listeners on n2 and n3 in turn "+
		"(n1 sends each packet twice; without the hop layouts the model could not tell a copy sent from an arrival); "+
		"\"N placed\" puts every member of session r on node r mod N, as Convene's placement does within one institution (members meet on the session's owner, new sessions go to the node with room); "+
		"\"N placed xN\" is the same with N×R sessions: N nodes given N times one node's load, each node as busy as the one node was. "+
		"Each layout measured over %s after %s of warm-up. A node's CPU is its process's user+system time with its idle use "+
		"(heartbeats, leases, the runtime: %s cores) taken off. A bridged packet waits up to %s for others going to the same node "+
		"(nats.media_batch), and they cross as one message.\n\n",
		res.Version, res.NATS, res.CPUs, res.Sessions, res.Members, loadgen.AudioPacketSize, loadgen.AudioInterval, res.Members-1,
		res.Window, res.Warmup, idle(res.Idle), res.Batch)

	b.WriteString("## What the listeners saw\n\n")
	b.WriteString("| layout | listeners on the speaker's node | avg / max ms | late | lost | listeners a hop away | avg / max ms | late | lost | added by the hop (avg ms) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range res.Points {
		l, r := p.Local, p.Bridged
		added := "–"
		if l.Count > 0 && r.Count > 0 {
			added = fmt.Sprintf("%+.2f", r.AvgMs-l.AvgMs)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Layout.Name, seen(l), seen(r)+" | "+added)
	}
	b.WriteString("\n")

	b.WriteString("## What each node did\n\n")
	b.WriteString("| layout | node | listeners | speakers | CPU (cores) | delivered /s | from endpoints /s | to nodes /s | from nodes /s | µs CPU per delivered | bytes per bridged packet: envelope+RTP / written to NATS | packets per message to a node |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range res.Points {
		for _, u := range p.Nodes {
			per, bytes, batch := "–", "–", "–"
			if u.Delivered > 0 {
				per = fmt.Sprintf("%.2f", 1e6*u.CPU/u.Delivered)
			}
			if u.BridgeOut > 0 {
				bytes = fmt.Sprintf("%.1f / %.1f", u.EnvelopeBytes, u.WireBytes)
				batch = fmt.Sprintf("%.2f", u.PerMessage)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.3f | %.0f | %.0f | %.0f | %.0f | %s | %s | %s |\n", p.Layout.Name, u.Node, u.Listeners, u.Speakers,
				u.CPU, u.Delivered, u.Ingress, u.BridgeOut, u.BridgeIn, per, bytes, batch)
		}
	}
	b.WriteString("\nThe nats-server processes' CPU over the same windows (cores; the cluster's broker network, not in the nodes' figures or the model):\n\n")
	b.WriteString("| layout | nats-1 | nats-2 | nats-3 | per packet sent across (µs) |\n|---|---:|---:|---:|---:|\n")
	for _, p := range res.Points {
		var sum, out float64
		cells := make([]string, 3)
		for i := range cells {
			cells[i] = "–"
			if i < len(p.NATS) {
				cells[i] = fmt.Sprintf("%.3f", p.NATS[i])
				sum += p.NATS[i]
			}
		}
		for _, u := range p.Nodes {
			out += u.BridgeOut
		}
		per := "–"
		if out > 0 {
			per = fmt.Sprintf("%.1f", 1e6*sum/out)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Layout.Name, strings.Join(cells, " | "), per)
	}
	fmt.Fprintf(&b, "\nThe RTP packet is %d bytes: the bridge's record (envelope and length, 7 bytes) adds the rest of the first figure; the second adds NATS's framing "+
		"(its PUB line with the subject, once per message), from the bytes the node passed to write(2) over the window (its NATS connections; "+
		"its UDP goes out by sendto/sendmmsg, not counted there), heartbeats and state announcements included.\n\n",
		loadgen.AudioPacketSize)

	b.WriteString("## Cost model\n\n")
	if res.FitErr != "" {
		fmt.Fprintf(&b, "No fit: %s\n\n", res.FitErr)
	} else {
		c := res.Costs
		fmt.Fprintf(&b, "Least squares over every measured node (%d), no cost below zero: CPU = Σ cost × rate.\n\n", len(res.Checks))
		b.WriteString("| µs of CPU per packet | delivered to an endpoint | taken from an endpoint | sent to another node (a copy into its batch) | received from another node |\n")
		b.WriteString("|---|---:|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| fitted | %.2f | %.2f | %.2f | %.2f |\n\n", 1e6*c.Delivered, 1e6*c.Ingress, 1e6*c.BridgeOut, 1e6*c.BridgeIn)
		b.WriteString("The model against each measured node:\n\n| layout | node | measured cores | model | error |\n|---|---|---:|---:|---:|\n")
		var worst float64
		for _, ch := range res.Checks {
			e := "–"
			if ch.Measured > 0.01 {
				rel := 100 * (ch.Predicted - ch.Measured) / ch.Measured
				worst = math.Max(worst, math.Abs(rel))
				e = fmt.Sprintf("%+.0f%%", rel)
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %s |\n", ch.Layout, ch.Node, ch.Measured, ch.Predicted, e)
		}
		fmt.Fprintf(&b, "\nWorst error on a node using over 0.01 cores: %.0f%%.\n\n", worst)
		if c := res.Costs; c.Delivered > 0 && c.Ingress > 0 {
			fmt.Fprintf(&b, "In this fit a packet sent across (one copy sent, one received) and delivered once costs %.2f × one taken from an endpoint and delivered once. "+
				"The fit's split between what a packet's arrival costs and what each delivery costs moves from run to run, as every layout delivers many packets per arrival "+
				"(6 to 19) and an arrival's cost includes waking the goroutines that send; the bridged target below is judged where it is measured directly (the hop layout).\n\n",
				(c.BridgeOut+c.BridgeIn+c.Delivered)/(c.Ingress+c.Delivered))
		}
	}

	b.WriteString("## Targets\n\n| target | measured | pass |\n|---|---:|---|\n")
	if res.BridgedRatio > 0 {
		fmt.Fprintf(&b, "| a node whose every delivered packet came over a hop (hop: n2) costs per delivered packet ≤ %.1f × a node fed by its own endpoints (1 node: n1) | %.2f × | %s |\n",
			TargetBridged, res.BridgedRatio, results.Pass(res.BridgedRatio <= TargetBridged))
	}
	for _, s := range res.Scaling {
		if s.Weak > 0 {
			fmt.Fprintf(&b, "| %d nodes carry ≥ %.1f × %d × one node's load: given %d × its load (%d×R sessions, each placed on one of them, so each node is as busy as the one node), CPU per delivered packet of 1 node over %d nodes' (the model gives 1: no packet crosses) | %.2f measured | %s |\n",
				s.Nodes, TargetScaling, s.Nodes, s.Nodes, s.Nodes, s.Nodes, s.Weak, results.Pass(s.Weak >= TargetScaling))
		}
	}
	b.WriteString("\n")

	b.WriteString("## Other ways of sharing the load (not the targets)\n\n" +
		"The same R sessions on N nodes: placed, each node carries 1/N of the load, and a node's CPU per packet rises as its load falls " +
		"(fewer packets share each wake-up of its goroutines), which the placed ×N layouts above leave out by keeping each node as busy as the one node. " +
		"Spread over N institutions, a node each (the seed's scenario, member k of session r on node (r+k) mod N): every institution's node takes every session's stream once, " +
		"so for one speaker and M−1 listeners the streams handled (in and out) grow from M to M + 2(N−1) — the seed's own arithmetic (global-mmcs: " +
		"each server receives every stream and sends each local one to the other sites) — and a stream taken in costs a node about ten delivered ones here (the model above).\n\n")
	b.WriteString("| N nodes | same R, placed: measured | spread over N institutions: model | measured | streams handled, one node over N institutions: M / (M + 2(N−1)) |\n|---:|---:|---:|---:|---:|\n")
	for _, s := range res.Scaling {
		placed, meas := "–", "–"
		if s.Placed > 0 {
			placed = fmt.Sprintf("%.2f", s.Placed)
		}
		if s.Measured > 0 {
			meas = fmt.Sprintf("%.2f", s.Measured)
		}
		m := float64(res.Members)
		fmt.Fprintf(&b, "| %d | %s | %.2f | %s | %.2f |\n", s.Nodes, placed, s.Model, meas, m/(m+2*float64(s.Nodes-1)))
	}
	b.WriteString("\n")

	if res.FitErr == "" {
		fmt.Fprintf(&b, "## Nodes needed (model; a node may use %.0f%% of one core)\n\n", 100*Budget)
		b.WriteString("| users | R sessions × M members × N institutions | one speaker each at | nodes | users per node |\n|---:|---|---:|---:|---:|\n")
		for _, p := range res.Predictions {
			s := p.Scenario
			fmt.Fprintf(&b, "| %d | %d × %d × %d | %.0f packets/s | %d | %.0f |\n", s.Users(), s.Sessions, s.Members, s.Institutions, s.PPS, p.Nodes,
				float64(s.Users())/float64(p.Nodes))
		}
		b.WriteString("\nThe seed (av-service-architecture) put 6,400 users on four brokers; its single broker carried 1,500 in one audio meeting.\n\n")
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "Note: %s\n\n", n)
	}
	return b.String()
}

func seen(l Listeners) string {
	if l.Count == 0 {
		return "0 | – | – | –"
	}
	return fmt.Sprintf("%d | %.2f / %.1f | %.2f%% | %.2f%%", l.Count, l.AvgMs, l.MaxMs, l.LatePct, l.LossPct)
}

func idle(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(s, ", ")
}
