package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/brokerbench"
	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// benchOverloadCmd drives the single-audio and multi-video scenarios to
// twice the Convene node's capacity with joins continuing, beside
// nats-server under the same offered load, and writes the report.
func benchOverloadCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "four windows of 3 s, and a node of -capacity 20000 packets/s unless set (a smoke run of a minute or two)")
	out := fs.String("out", "bench/results", "directory for the report (.md, .json, .png)")
	scen := fs.String("scenarios", "", "comma-separated scenarios (default all): "+strings.Join(brokerbench.OverloadNames(), ","))
	peers := fs.String("peers", "nats-server", "comma-separated peers under the same load (nats-server; empty for none)")
	capPPS := fs.Float64("capacity", 0, "the node's capacity.pps (0: it measures its own; -quick: 20000)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	inStep := fs.Bool("in-step", false, "start every meeting's speaker at the same instant, so that all meetings send each frame together (by default their starts spread over one frame interval)")
	pin := fs.Bool("pin", false, "give each server CPU 0 to itself and run the listeners and speakers (this process) on the other CPUs (on two CPUs the load, which receives every packet, then has one core and falls behind first)")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *quick && *capPPS == 0 {
		*capPPS = 20000
	}
	bin := conveneBin("overload", *server, stderr)
	if bin == "" {
		return 1
	}
	br := startBench("overload", *out, *wait, stderr)
	if br == nil {
		return 1
	}
	defer br.done()
	ctx := br.ctx

	// Many 20-person meetings at twice the capacity are more sessions than
	// the node's default cap (sessions.max, 1000): the benchmark measures
	// delivery, not that cap.
	extra := []string{"-sessions-max", "100000"}
	if *capPPS > 0 {
		extra = append(extra, "-capacity-pps", strconv.FormatFloat(*capPPS, 'f', -1, 64))
	}
	if *pin {
		if err := proc.PinSelf(); err != nil {
			fmt.Fprintln(stderr, "convene-bench overload: -pin:", err)
			return 1
		}
	}
	conv, err := brokerbench.StartConvene(bin, filepath.Join(br.tmp, "node"), *pin, extra...)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench overload:", err)
		return 1
	}
	defer conv.Stop()
	capacity, err := conv.CapacityPPS()
	if err != nil || capacity <= 0 {
		fmt.Fprintf(stderr, "convene-bench overload: the node's capacity: %v %v\n", capacity, err)
		return 1
	}
	systems := []brokerbench.Joiner{conv}
	nats, notes, ok := startPeers("overload", *peers, *pin, stderr)
	if !ok {
		return 2
	}
	for _, n := range nats {
		defer n.Stop()
		systems = append(systems, n)
	}
	var list []string
	if *scen != "" {
		list = strings.Split(*scen, ",")
	}
	start := time.Now()
	r := brokerbench.RunOverload(ctx, systems, brokerbench.OverloadOptions{Quick: *quick, Scenarios: list, CapacityPPS: capacity,
		MaxFiles: loadgen.FileLimit(), InStep: *inStep,
		Log: func(f string, a ...any) {
			fmt.Fprintf(stderr, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	src := "measured by the node"
	if *capPPS > 0 {
		src = "configured (capacity.pps)"
	}
	if *pin {
		notes = append(notes, fmt.Sprintf("Each server ran on CPU %d alone (taskset); the listeners, speakers and joins (this benchmark's process) on the other CPUs: what one core of its own serves, beside a load that would be on other machines.", proc.ServerCPU))
	}
	r.Notes = append(append(notes, fmt.Sprintf("Convene's capacity %.0f packets/s, %s; nats-server has no admission and gets the same offered listeners.", capacity, src)), r.Notes...)
	md, js, pngs, err := brokerbench.WriteOverloadReport(*out, r)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench overload: writing the report:", err)
		return 1
	}
	printReport(stdout, brokerbench.FormatOverload(r), r.Notes, md, js, pngs)
	if ctx.Err() != nil {
		return 1
	}
	return 0
}
