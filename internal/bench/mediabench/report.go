package mediabench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/bench/results"
)

// SeedRow is a row of the seed's Table 2 ("Typical computation overhead
// caused by media services", Global-MMCS on a commercial PC of its day).
type SeedRow struct {
	Service   string
	Instances int     // instances running
	CPU       float64 // the machine's CPU they took, in percent
	Says      string  // the table's words
}

// SeedTable2 is the seed's Table 2, its video rows (the audio mixing row
// is the mixer benchmark's).
var SeedTable2 = []SeedRow{
	{"Video mixing (4-way, H.261, 150 kb/s)", 4, 94, "94% while 4 video mixers (4-way mixing) are running"},
	{"Image grabber (H.261 → JPEG)", 50, 70, "70% while 50 image grabbers are running"},
	{"RealStreaming producer (23 fps)", 4, 90, "90% while 4 23fps stream producers are running"},
}

// Format renders the run as Markdown.
func Format(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Media services: composites, thumbnails, HLS viewers, %s\n\n", res.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "One node (`convene serve` and its ffmpeg children) on %d CPUs; every camera replays one VP8 recording "+
		"(ffmpeg's testsrc2, %d×%d at %d fps, a keyframe a second, %.0f kb/s) from this process; each step measured over %s after %s of warm-up.\n\n",
		res.CPUs, CameraWidth, CameraHeight, CameraFPS, res.CameraKbps, res.Window, res.Warmup)
	formatSeed(&b, res)
	if len(res.Composites) > 0 {
		formatComposites(&b, res.Composites, res.CPUs)
	}
	if len(res.Thumbnails) > 0 {
		formatThumbnails(&b, res.Thumbnails, res.CPUs)
	}
	if len(res.HLS) > 0 {
		formatHLS(&b, res.HLS, res.LoopbackMBps)
	}
	if res.Nice != 0 {
		fmt.Fprintf(&b, "The node (with its ffmpeg children), the peers (ffmpeg, nginx) and this process (the cameras, receivers and viewers) ran at niceness %d, "+
			"so that other work on a shared machine took less of their CPU; on a quiet machine it changes nothing.\n\n", res.Nice)
	}
	fmt.Fprintf(&b, "\"others\" is the CPU neither the measured system nor this process (the load) used over the window: other work on a shared machine; %s.\n\n", results.TriesNote)
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

// formatSeed prints the seed's Table 2 beside what this run found: the
// most instances at full rate and what one costs, as a share of one core.
func formatSeed(b *strings.Builder, res Result) {
	b.WriteString("## Beside the seed's Table 2\n\n")
	b.WriteString("| media service | seed: instances | seed: CPU | seed: CPU per instance | Convene: at full rate | Convene: CPU per instance | peer: at full rate | peer: CPU per instance |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(r SeedRow, ours, peer string) {
		fmt.Fprintf(b, "| %s | %d | %.0f%% | %.1f%% | %s |\n", r.Service, r.Instances, r.CPU, r.CPU/float64(r.Instances), ours+" | "+peer)
	}
	comp := func(sys string) string {
		for _, s := range res.Composites {
			if s.System == sys {
				if s.MaxOK == 0 {
					return "0 | –"
				}
				return fmt.Sprintf("%d 2×2 360p15 composites | %.1f%% of a core", s.MaxOK, 100*s.CPUPer)
			}
		}
		return "– | –"
	}
	row(SeedTable2[0], comp("convene"), comp("ffmpeg"))
	thumbs := "– | –"
	for _, s := range res.Thumbnails {
		if s.MaxOK > 0 {
			p := s.Points[lastOK(s)]
			thumbs = fmt.Sprintf("%d grabbers (%.1f JPEG/s) | %.1f%% of a core", s.MaxOK, s.PerSecond, 100*p.CPUPerGrabber)
		} else {
			thumbs = "0 | –"
		}
	}
	row(SeedTable2[1], thumbs, "– | –")
	hls := func(sys string) string {
		for _, s := range res.HLS {
			if s.System == sys && s.ProducerCPU > 0 {
				return fmt.Sprintf("%d viewers of one producer | producer %.1f%% of a core", s.MaxOK, 100*s.ProducerCPU)
			}
		}
		return "– | –"
	}
	row(SeedTable2[2], hls("convene"), hls("nginx"))
	b.WriteString("\nThe seed's machine was a commercial PC of 2005 with H.261 (CIF at most) and JMF; its percentages are of that whole machine. " +
		"Ours are of one core of this one. The peer is the classic pipeline: plain ffmpeg for the composite, ffmpeg's HLS muxer behind nginx for streaming; " +
		"no peer for the grabber (ffmpeg's decoder is the node's too). A composite's CPU is the node's with its ffmpeg children over the window, per composite; " +
		"a producer's is its HLS encoder's with nobody watching.\n\n")
}

func lastOK(s ThumbSeries) int {
	for i := len(s.Points) - 1; i >= 0; i-- {
		if s.Points[i].OK && s.Points[i].Tracks == s.MaxOK {
			return i
		}
	}
	return 0
}

// cpuLimit is the machine's limit by CPU: its cores over one instance's
// CPU, as if it scaled and nothing else ran.
func cpuLimit(cpus int, per float64) string {
	if per <= 0 {
		return ""
	}
	return fmt.Sprintf("; the machine's %d CPUs at that cost would hold %.0f", cpus, float64(cpus)/per)
}

// firstCPU is the CPU per instance of a series' first step, when none
// passed: what one costs, if not on time.
func firstCPU(ps []CompositePoint) float64 {
	if len(ps) == 0 {
		return 0
	}
	return ps[0].CPUPer
}

func formatComposites(b *strings.Builder, ss []CompositeSeries, cpus int) {
	b.WriteString("## Composites (2×2, 640×360, 15 fps, VP8)\n\n")
	fmt.Fprintf(b, "Each composite shows four cameras; its RTP is read back (the node's through a receive-only link; ffmpeg's sent straight to this process) "+
		"and every frame timed against the 15 fps grid of its RTP timestamps, anchored at the earliest arrival relative to its timestamp; "+
		"late is more than %d ms after that. The frames due in a window are those its frames' timestamps span (a frame lost between two is missed, the window's edges cut none). "+
		"A step passes when ≥ %.1f%% of the frames due arrived, ≤ %.1f%% of them late, and no composite got under %.0f%% of the window's 15 a second.\n\n",
		LateAfter.Milliseconds(), 100*Bar.MinReceived, 100*Bar.MaxLate, 100*Bar.StarvedBelow)
	b.WriteString("| system | composites | frames received | late | starved | latest ms | CPU (cores) | CPU per composite | load's CPU | machine busy / steal | others | pass |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range ss {
		for _, p := range s.Points {
			f := p.Frames
			fmt.Fprintf(b, "| %s | %s | %.2f%% | %.2f%% | %d | %.0f | %.2f | %.3f | %.2f | %.0f%% / %.0f%% | %.2f | %s |\n",
				s.System, again(p.Composites, p.Retry), 100*f.ReceivedShare(), 100*f.LateShare(), f.Starved, f.LateMax,
				p.CPU, p.CPUPer, p.LoadCPU, p.MachineBusy, p.Steal, p.Others, results.Pass(p.OK))
		}
	}
	b.WriteString("\n")
	for _, s := range ss {
		fmt.Fprintf(b, "- %s (%s): **%d composites** at full rate", s.System, s.Version, s.MaxOK)
		if s.MaxOK > 0 {
			fmt.Fprintf(b, ", %.3f cores each%s", s.CPUPer, cpuLimit(cpus, s.CPUPer))
		} else if c := firstCPU(s.Points); c > 0 {
			fmt.Fprintf(b, " (one cost %.3f cores, late%s)", c, cpuLimit(cpus, c))
		}
		fmt.Fprintf(b, "; ended at %s", s.Ended)
		if s.Note != "" {
			fmt.Fprintf(b, " — %s", s.Note)
		}
		b.WriteString("\n")
	}
	if c, f := findComp(ss, "convene"), findComp(ss, "ffmpeg"); c != nil && f != nil && c.MaxOK > 0 && f.MaxOK > 0 && f.CPUPer > 0 {
		if found(c.Ended) && found(f.Ended) {
			fmt.Fprintf(b, "- Convene / plain ffmpeg: %.2f× the composites, ", float64(c.MaxOK)/float64(f.MaxOK))
		} else {
			b.WriteString("- Convene / plain ffmpeg: no ratio of composites (a series did not end at a miss), ")
		}
		fmt.Fprintf(b, "%.2f× the CPU per composite at their most\n", c.CPUPer/f.CPUPer)
	}
	b.WriteString("\n")
}

func findComp(ss []CompositeSeries, sys string) *CompositeSeries {
	for i := range ss {
		if ss[i].System == sys {
			return &ss[i]
		}
	}
	return nil
}

func again(n int, retry bool) string {
	s := strconv.Itoa(n)
	if retry {
		s += " (again)"
	}
	return s
}

func formatThumbnails(b *strings.Builder, ss []ThumbSeries, cpus int) {
	b.WriteString("## Thumbnails (JPEG every 3 s per video track, at most 320 wide)\n\n")
	fmt.Fprintf(b, "N cameras, a grabber on each (started by the API's thumbnail.jpg, kept by asking again every 20 s); "+
		"JPEGs counted by convene_thumbnail_images_total over the window. A step passes at ≥ %.0f%% of the N/3 a second due.\n\n", 100*ThumbBar)
	b.WriteString("| system | tracks | JPEGs / due | JPEG/s | CPU (cores) | CPU per grabber | CPU ms per JPEG | load's CPU | machine busy / steal | others | pass |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range ss {
		for _, p := range s.Points {
			fmt.Fprintf(b, "| %s | %s | %.0f / %.1f | %.2f | %.2f | %.3f | %.0f | %.2f | %.0f%% / %.0f%% | %.2f | %s |\n",
				s.System, again(p.Tracks, p.Retry), p.Images, p.Expected, p.PerSecond, p.CPU, p.CPUPerGrabber, p.CPUPerImage,
				p.LoadCPU, p.MachineBusy, p.Steal, p.Others, results.Pass(p.OK))
		}
	}
	b.WriteString("\n")
	for _, s := range ss {
		fmt.Fprintf(b, "- %s (%s): **%d grabbers**, %.1f JPEG/s at full rate", s.System, s.Version, s.MaxOK, s.PerSecond)
		if s.MaxOK > 0 {
			fmt.Fprintf(b, ", %.0f ms of CPU per JPEG (the decoder decodes every frame to keep one in 45)%s grabbers", s.CPUPerImage,
				cpuLimit(cpus, s.Points[lastOK(s)].CPUPerGrabber))
		}
		fmt.Fprintf(b, "; ended at %s", s.Ended)
		if s.Note != "" {
			fmt.Fprintf(b, " — %s", s.Note)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func formatHLS(b *strings.Builder, ss []ViewerSeries, limit float64) {
	b.WriteString("## HLS viewers at full rate\n\n")
	fmt.Fprintf(b, "One stream of the camera and a PCMU tone. "+
		"Convene: the node's own LL-HLS (its ffmpeg child encodes H.264, gohlslib muxes it with the Opus mix into fMP4 segments of %s s, as the peer's (streaming.hls_segment; 1 s by default), and parts, "+
		"served from memory by its HTTP server; a viewer is redirected once to the signed multivariant playlist and follows its video's media playlist "+
		"in whole segments, as a player without LL-HLS; the audio rendition is not fetched); "+
		"the classic pipeline: ffmpeg's HLS muxer (H.264 800 kb/s + AAC 96 kb/s, %s s MPEG-TS segments, %d in the playlist), fed the same packets, into a directory Debian's nginx serves. "+
		"Each viewer is a Go client of this process with its own connection, following the playlist like a player: "+
		"reloads after the last segment's duration (half the target when nothing changed, RFC 8216 §6.3.4), "+
		"fetches each new segment once, starting at the newest; new viewers start spread over one segment. "+
		"A viewer misses when a segment takes longer to fetch than to play, a request fails, or a segment leaves the playlist unfetched; "+
		"a step passes with no miss. The series stops at the first miss or at %.0f%% of the machine's loopback limit (%.0f MB/s: TCP on 127.0.0.1, a connection per CPU, measured first).\n\n",
		hlsSegment, hlsSegment, hlsList, 100*LimitShare, limit)
	b.WriteString("| system | viewers | segments | MB/s | fetch p50 ms | p99 ms | max ms | late | errors | skipped | server CPU (cores) | load's CPU | machine busy / steal | others | pass |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range ss {
		for _, p := range s.Points {
			fmt.Fprintf(b, "| %s | %s | %d | %.2f | %.1f | %.1f | %.1f | %d | %d | %d | %.2f | %.2f | %.0f%% / %.0f%% | %.2f | %s |\n",
				s.System, again(p.Viewers, p.Retry), p.Segments, p.MBps, p.P50, p.P99, p.Max, p.Late, p.Errors, p.Skipped,
				p.CPU, p.LoadCPU, p.MachineBusy, p.Steal, p.Others, results.Pass(p.OK))
		}
	}
	b.WriteString("\n")
	for _, s := range ss {
		fmt.Fprintf(b, "- %s (%s): **%d viewers** at full rate, %.2f MB/s", s.System, s.Version, s.MaxOK, s.MBps)
		if limit > 0 {
			fmt.Fprintf(b, " (%.2f%% of the loopback limit)", 100*s.MBps/limit)
		}
		fmt.Fprintf(b, "; ended at %s", s.Ended)
		if s.ProducerCPU > 0 {
			fmt.Fprintf(b, "; producer %.2f cores with nobody watching", s.ProducerCPU)
		}
		if s.ServerCPU != "" {
			fmt.Fprintf(b, "; server CPU is %s", s.ServerCPU)
		}
		if s.Note != "" {
			fmt.Fprintf(b, " — %s", s.Note)
		}
		b.WriteString("\n")
	}
	if len(ss) == 2 && ss[1].MaxOK > 0 && ss[0].MaxOK > 0 {
		if found(ss[0].Ended) && found(ss[1].Ended) {
			fmt.Fprintf(b, "- Convene / nginx viewers: %.2f×\n", float64(ss[0].MaxOK)/float64(ss[1].MaxOK))
		} else {
			b.WriteString("- Convene / nginx viewers: no ratio (a series did not end at a miss or the limit)\n")
		}
	}
	b.WriteString("\n")
}

// Write saves <dir>/<date>-media.md and .json and returns the .md path.
func Write(dir string, res Result) (string, error) {
	return results.Write(dir, res.Date, "media", res, Format(res))
}
