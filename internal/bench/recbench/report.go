package recbench

import (
	"fmt"
	"github.com/convene/convene/internal/bench/convene"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
)

// Targets of issue 15: streams recorded at once by one node at each rate,
// and the ratio to Janus's recorder on the same machine. Voyager's node
// (the seed) recorded 37 streams at 128 kb/s and 5 to 8 at 5 Mb/s.
var (
	Target      = map[string]int{"128k": 1000, "5M": 50}
	Voyager     = map[string]string{"128k": "37", "5M": "5–8"}
	TargetRatio = 1.5
)

// Format renders the run as Markdown.
func Format(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Recording beside Janus's recorder, %s\n\n", res.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "N streams, each a pion WebRTC publisher of one track, in rooms of a few publishers: Convene sessions recorded through its API "+
		"(`POST /api/v1/sessions/{id}/recordings`, rtpdump files), Janus VideoRoom rooms created with record=true (.mjr files). "+
		"In every room a live listener receives every stream. %d CPUs; each step measured over %s after %s of warm-up, rooms added to those running.\n\n",
		res.CPUs, res.Window, res.Warmup)
	for _, s := range res.Series {
		if s.System == PlainSystem {
			fmt.Fprintf(&b, "%s is the same node fed the way Voyager's streams came: each stream plain RTP from a socket of its own (a link of the session, "+
				"with its codec named), each room's listener a plain RTP link receiving every stream. No SRTP and no ICE, so the broker, the recorder "+
				"and the kernel are what is measured; Janus's VideoRoom takes WebRTC publishers only, so the comparison with Janus is the WebRTC series.\n\n", PlainSystem)
			break
		}
	}
	fmt.Fprintf(&b, "Every packet carries its send time and its stream and number; after each window the benchmark reads the files each server wrote "+
		"and counts the packets of the window that are not in them. A step passes when **none is missing**, **no listener packet arrived more than %d ms "+
		"after it was sent** (rtcbench's latency bar) and the listeners together lost under %.0f%% (rtcbench's loss bar); "+
		"and only when the load sent every frame on its schedule and every packet its connections took (else the load, not the server, is the limit). "+
		"\"sent\" is the packets sent over the window against the streams' mean rate: a window of video holds more or fewer keyframes than the mean.\n\n",
		LateAfter, 100*MaxListenerLoss)
	for _, name := range []string{"128k", "5M"} {
		var ss []Series
		bySystem := map[string]Series{}
		for _, s := range res.Series {
			if s.Shape == name {
				ss = append(ss, s)
				bySystem[s.System] = s
			}
		}
		if len(ss) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", Shapes[name].Title)
		b.WriteString("| system | streams | rooms | sent | not recorded | server's drops: recorder / forwarding | kernel's drops: server / load | listeners' loss | late | latency p50 / p99 / max ms | read by the listener: late, p99 ms | node's own delay p99 ms | load's lag ms | server CPU (cores) | streams per core | load's CPU (cores) | machine busy / steal | others' CPU (cores) | pass |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, s := range ss {
			for _, p := range s.Points {
				n := strconv.Itoa(p.Streams)
				if p.Retry {
					n += " (again)"
				}
				drops := "–"
				if p.Drops >= 0 && p.ForwardDrops >= 0 {
					drops = fmt.Sprintf("%.0f / %.0f", p.Drops, p.ForwardDrops)
				}
				sent := "–"
				if p.Nominal > 0 {
					sent = fmt.Sprintf("%.1f%%", 100*float64(p.Sent)/p.Nominal)
				}
				own := convene.BoundMs(p.NodeDelayP99)
				pass := results.Pass(p.OK)
				if !p.OK && p.Why != "" {
					pass += " (" + p.Why + ")"
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %s | %d / %d | %.2f%% | %d | %.0f / %.0f / %.0f | %d, %.0f | %s | %.0f | %.3f | %.0f | %.2f | %.0f%% / %.0f%% | %.2f | %s |\n",
					s.System, n, p.Rooms, sent, p.Missing, drops, p.ServerUDPDrops, p.LoadUDPDrops, 100*p.Live.Loss, p.Live.Late, p.Live.LatP50, p.Live.LatP99, p.Live.LatMax, p.Live.ReadLate, p.Live.ReadP99,
					own, p.SendLagMax, p.CPU, p.PerCore, p.LoadCPU, p.MachineBusy, p.Steal, p.Others, pass)
			}
		}
		b.WriteString("\n")
		for _, s := range ss {
			fmt.Fprintf(&b, "- %s (%s, %d streams a room): **%d streams** at the bar", s.System, s.Version, s.PerRoom, s.MaxOK)
			if s.MaxOK > 0 {
				fmt.Fprintf(&b, ", %.0f streams per core there", s.PerCore)
			}
			if s.Note != "" {
				fmt.Fprintf(&b, " — %s", s.Note)
			}
			b.WriteString("\n")
		}
		c, hasC := bySystem["convene"]
		if j, ok := bySystem["janus"]; hasC && ok && j.MaxOK > 0 {
			fmt.Fprintf(&b, "- Convene / Janus streams: **%.2f×** (target %.1f×)\n", float64(c.MaxOK)/float64(j.MaxOK), TargetRatio)
		} else if hasC && ok && len(j.Points) > 0 {
			fmt.Fprintf(&b, "- Convene / Janus streams: Janus passed no step (its first, %d streams, did not), so no ratio (target %.1f×)\n", j.Points[0].Streams, TargetRatio)
		}
		if hasC {
			fmt.Fprintf(&b, "- Convene over WebRTC: %d streams (target %d; Voyager's node: %s)\n", c.MaxOK, Target[name], Voyager[name])
		}
		if p, ok := bySystem[PlainSystem]; ok {
			fmt.Fprintf(&b, "- Convene over plain RTP (Voyager's kind of stream): %d streams (target %d; Voyager's node: %s)\n", p.MaxOK, Target[name], Voyager[name])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\"not recorded\" counts the window's packets missing from the files; \"server's drops\" is what Convene itself counted over the window "+
		"as not recorded (convene_recorder_dropped_packets_total) and as not forwarded to a listener (convene_webrtc_dropped_packets_total; over plain RTP convene_media_dropped_packets_total); Janus does not say. "+
		"\"kernel's drops\" are the datagrams the kernel dropped at the server's sockets and at the load's, their receive buffers full (/proc/net/udp): a server, or a load, that did not read in time. \"late\" counts listener packets over the bar; latency is from the send time in the payload to the packet's arrival at the listener's socket (the kernel's receive timestamp, SO_TIMESTAMPNS): what the server delivered, and when. "+
		"\"read by the listener\" is the same to the moment the listener's WebRTC stack (pion, in this benchmark's process, on the CPU it shares with every publisher) handed the packet over: the load's own delay is in it, so it is shown, not judged. "+
		"\"node's own delay\" is the share of it Convene spent queueing for the listener (convene_webrtc_forward_delay_seconds, as the upper bound of its bucket; Janus does not say): latency beyond it is spent outside the node's queues (its reading the packet, the kernel, the load's sending). "+
		"\"load's lag\" is how late, at worst, the load sent a frame against its schedule. "+
		"\"others' CPU\" is what neither the server nor the load used (other work on a shared machine); %s.\n\n", results.TriesNote)
	if res.Pinned {
		fmt.Fprintf(&b, "Each server ran on CPU %d alone (taskset); the publishers and listeners (this benchmark's process) on the other CPUs. "+
			"\"streams per core\" is streams / the server's CPU over the window: what a whole core would carry at that load, if it scales.\n\n", proc.ServerCPU)
	}
	if res.Nice != 0 {
		fmt.Fprintf(&b, "Both servers, and this benchmark's process (the load), ran at niceness %d, so that other work on a shared machine took less of their CPU; on a quiet machine it changes nothing.\n\n", res.Nice)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

// Write saves <dir>/<date>-recorder.md and .json and returns the .md path.
func Write(dir string, res Result) (string, error) {
	return results.Write(dir, res.Date, "recorder", res, Format(res))
}
