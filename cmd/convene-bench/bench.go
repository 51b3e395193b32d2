package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("broker", *server, stderr)
	if bin == "" {
		return 1
	}
	br := startBench("broker", *out, *wait, stderr)
	if br == nil {
		return 1
	}
	defer br.done()
	ctx, tmp := br.ctx, br.tmp
	files := loadgen.FileLimit()
	probeBin, err := brokerbench.BuildProbe(tmp)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench broker: building the probe:", err)
		return 1
	}
	// The broker's own limit: admission off (capacity.pps out of reach);
	// `convene-bench overload` measures the node with it.
	conv, err := brokerbench.StartConvene(bin, filepath.Join(tmp, "node"), false, "-capacity-pps", "1e12")
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench broker:", err)
		return 1
	}
	defer conv.Stop()
	systems := []brokerbench.System{conv}
	nats, notes, ok := startPeers("broker", *peers, false, stderr)
	if !ok {
		return 2
	}
	for _, n := range nats {
		defer n.Stop()
		systems = append(systems, n)
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
	printReport(stdout, brokerbench.FormatTables(r), r.Notes, md, js, pngs)
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// startPeers starts the peer brokers named in list (nats-server); a peer
// that cannot run is a note. ok is false for an unknown name.
func startPeers(cmd, list string, pin bool, stderr io.Writer) (peers []*brokerbench.NATSPeer, notes []string, ok bool) {
	for _, p := range strings.Split(list, ",") {
		switch strings.TrimSpace(p) {
		case "":
		case "nats-server":
			n, err := brokerbench.StartNATS(pin)
			if err != nil {
				notes = append(notes, "nats-server peer not run: "+err.Error())
				continue
			}
			peers = append(peers, n)
		default:
			fmt.Fprintf(stderr, "convene-bench %s: unknown peer %q\n", cmd, p)
			for _, n := range peers {
				n.Stop()
			}
			return nil, nil, false
		}
	}
	return peers, notes, true
}

// printReport prints a report's tables, notes and files.
func printReport(stdout io.Writer, tables string, notes []string, md, js string, pngs []string) {
	fmt.Fprintln(stdout, tables)
	for _, n := range notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintf(stdout, "report: %s\n        %s\n", md, js)
	for _, p := range pngs {
		fmt.Fprintf(stdout, "        %s\n", p)
	}
}

func scenarioNames() []string {
	return []string{brokerbench.ScenarioAudio, brokerbench.ScenarioVideo, brokerbench.ScenarioCombined, brokerbench.ScenarioMultiVideo, brokerbench.ScenarioMultiCombined}
}
