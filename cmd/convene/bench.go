package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench"
	"github.com/convene/convene/internal/loadgen"
)

// benchCmd runs the seed's benchmark suite against Convene and nats-server
// in one invocation and writes the report.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "short points and fewer bisection steps (about 5 minutes)")
	out := fs.String("out", "bench/results", "directory for the report (.md, .json, .png, profiles)")
	scen := fs.String("scenarios", "", "comma-separated scenarios (default all): "+strings.Join(scenarioNames(), ","))
	peers := fs.String("peers", "nats-server", "comma-separated peers to compare with (nats-server; empty for none)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	lock := lockBench("bench", *wait, stderr)
	if lock == nil {
		return 1
	}
	defer lock.Close()
	files := loadgen.FileLimit()
	tmp := benchDirs("bench", *out, stderr)
	if tmp == "" {
		return 1
	}
	defer os.RemoveAll(tmp)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	probeBin, err := bench.BuildProbe(tmp)
	if err != nil {
		fmt.Fprintln(stderr, "convene bench: building the probe:", err)
		return 1
	}
	self, _ := os.Executable()
	conv, err := bench.StartConvene(self, filepath.Join(tmp, "node"))
	if err != nil {
		fmt.Fprintln(stderr, "convene bench:", err)
		return 1
	}
	defer conv.Stop()
	systems := []bench.System{conv}
	var notes []string
	for _, p := range strings.Split(*peers, ",") {
		switch strings.TrimSpace(p) {
		case "":
		case "nats-server":
			n, err := bench.StartNATS()
			if err != nil {
				notes = append(notes, "nats-server peer not run: "+err.Error())
				continue
			}
			defer n.Stop()
			systems = append(systems, n)
		default:
			fmt.Fprintf(stderr, "convene bench: unknown peer %q\n", p)
			return 2
		}
	}
	notes = append(notes, "Janus peer not run: not built yet (see the issue); nats-server is the peer broker.")

	var list []string
	if *scen != "" {
		list = strings.Split(*scen, ",")
	}
	budget := 25 * time.Minute
	if *quick {
		budget = 5 * time.Minute
	}
	prog := bench.NewProgress(stdout, budget, bench.IsTTY(os.Stdout))
	start := time.Now()
	r := bench.Run(ctx, systems, func(n int) (bench.Probe, error) {
		return bench.RunProbe(ctx, probeBin, n, loadgen.AudioPacketSize, 5)
	}, bench.Options{Quick: *quick, Scenarios: list, OutDir: *out, Progress: prog, MaxListeners: files - 512,
		Log: func(f string, a ...any) {
			fmt.Fprintf(stderr, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	prog.Done("done")
	r.Notes = append(notes, r.Notes...)
	md, js, pngs, err := bench.WriteReport(*out, r)
	if err != nil {
		fmt.Fprintln(stderr, "convene bench: writing the report:", err)
		return 1
	}
	fmt.Fprintln(stdout, bench.FormatTables(r))
	for _, n := range r.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintf(stdout, "report: %s\n        %s\n", md, js)
	for _, p := range pngs {
		fmt.Fprintf(stdout, "        %s\n", p)
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

func scenarioNames() []string {
	return []string{bench.ScenarioAudio, bench.ScenarioVideo, bench.ScenarioCombined, bench.ScenarioMultiVideo, bench.ScenarioMultiCombined}
}

// loadCmd drives a running node with the seed's streams for a while and
// prints what the listeners measured.
func loadCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "node to drive")
	kind := fs.String("kind", "audio", "audio, video or both (one meeting of each per meeting pair)")
	listeners := fs.Int("listeners", 100, "listeners per meeting")
	meetings := fs.Int("meetings", 1, "meetings")
	dur := fs.Duration("duration", 10*time.Second, "how long to send (the first 100 packets of each stream are not counted)")
	key := fs.String("api-key", os.Getenv("CONVENE_API_KEY"), "the node's API key (default $CONVENE_API_KEY; `convene serve` prints it)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dur > 10*time.Minute || *listeners < 1 || *meetings < 1 || *listeners**meetings > 50000 {
		fmt.Fprintln(stderr, "convene load: keep duration ≤ 10m, listeners ≥ 1, meetings ≥ 1 and at most 50000 listeners in all")
		return 2
	}
	var plan []bench.Meeting
	for i := 0; i < *meetings; i++ {
		switch *kind {
		case "audio":
			plan = append(plan, bench.Meeting{Kind: loadgen.Audio, Listeners: *listeners})
		case "video":
			plan = append(plan, bench.Meeting{Kind: loadgen.Video, Listeners: *listeners})
		case "both":
			plan = append(plan, bench.Meeting{Kind: loadgen.Audio, Listeners: *listeners}, bench.Meeting{Kind: loadgen.Video, Listeners: *listeners})
		default:
			fmt.Fprintf(stderr, "convene load: kind must be audio, video or both, not %q\n", *kind)
			return 2
		}
	}
	if *key == "" {
		fmt.Fprintln(stderr, "convene load: needs the node's API key to create links: -api-key KEY or CONVENE_API_KEY (`convene serve` prints it; it is kept in <data_dir>/api_key)")
		return 2
	}
	c, err := bench.AttachConvene(*url, *key)
	if err != nil {
		fmt.Fprintln(stderr, "convene load:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pt := bench.RunPoint(ctx, c, "load", plan, *dur)
	if pt.Error != "" {
		fmt.Fprintln(stderr, "convene load:", pt.Error)
		return 1
	}
	fmt.Fprintf(stdout, "%d meetings, %d participants, %v\n", pt.Meetings, pt.Participants, *dur)
	for _, k := range pt.Kinds {
		fmt.Fprintf(stdout, "%s: first %.2f ms, last %.2f ms, avg %.2f ms latency; jitter %.2f ms; late %.3f %%; loss %.3f %%; out %.1f Mb/s\n",
			k.Kind, k.FirstLatencyMs, k.LastLatencyMs, k.AvgLatencyMs, k.AvgJitterMs, k.LatePct, k.LossPct, k.OutMbps)
	}
	fmt.Fprintf(stdout, "delivered %.0f packets/s; quality bar (0 %% late, avg < 20 ms): %v\n", pt.DeliveredPPS, map[bool]string{true: "pass", false: "FAIL"}[pt.Pass])
	return 0
}
