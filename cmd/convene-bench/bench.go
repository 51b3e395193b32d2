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

	"github.com/convene/convene/internal/bench/brokerbench"
	"github.com/convene/convene/internal/bench/loadgen"
)

// benchCmd runs the seed's broker scenarios against Convene (a `convene
// serve` child process) and nats-server in one invocation and writes the
// report.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "short points and fewer bisection steps (about 5 minutes)")
	out := fs.String("out", "bench/results", "directory for the report (.md, .json, .png, profiles)")
	scen := fs.String("scenarios", "", "comma-separated scenarios (default all): "+strings.Join(scenarioNames(), ","))
	peers := fs.String("peers", "nats-server", "comma-separated peers to compare with (nats-server; empty for none)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	bin := conveneBin("broker", *server, stderr)
	if bin == "" {
		return 1
	}
	lock := lockBench("broker", *wait, stderr)
	if lock == nil {
		return 1
	}
	defer lock.Close()
	files := loadgen.FileLimit()
	tmp := benchDirs("broker", *out, stderr)
	if tmp == "" {
		return 1
	}
	defer os.RemoveAll(tmp)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	probeBin, err := brokerbench.BuildProbe(tmp)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench broker: building the probe:", err)
		return 1
	}
	conv, err := brokerbench.StartConvene(bin, filepath.Join(tmp, "node"))
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench broker:", err)
		return 1
	}
	defer conv.Stop()
	systems := []brokerbench.System{conv}
	var notes []string
	for _, p := range strings.Split(*peers, ",") {
		switch strings.TrimSpace(p) {
		case "":
		case "nats-server":
			n, err := brokerbench.StartNATS()
			if err != nil {
				notes = append(notes, "nats-server peer not run: "+err.Error())
				continue
			}
			defer n.Stop()
			systems = append(systems, n)
		default:
			fmt.Fprintf(stderr, "convene-bench broker: unknown peer %q\n", p)
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
	prog := brokerbench.NewProgress(stdout, budget, brokerbench.IsTTY(os.Stdout))
	start := time.Now()
	r := brokerbench.Run(ctx, systems, func(n int) (brokerbench.Probe, error) {
		return brokerbench.RunProbe(ctx, probeBin, n, loadgen.AudioPacketSize, 5)
	}, brokerbench.Options{Quick: *quick, Scenarios: list, OutDir: *out, Progress: prog, MaxListeners: files - 512,
		Log: func(f string, a ...any) {
			fmt.Fprintf(stderr, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	prog.Done("done")
	r.Notes = append(notes, r.Notes...)
	md, js, pngs, err := brokerbench.WriteReport(*out, r)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench broker: writing the report:", err)
		return 1
	}
	fmt.Fprintln(stdout, brokerbench.FormatTables(r))
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
	return []string{brokerbench.ScenarioAudio, brokerbench.ScenarioVideo, brokerbench.ScenarioCombined, brokerbench.ScenarioMultiVideo, brokerbench.ScenarioMultiCombined}
}
