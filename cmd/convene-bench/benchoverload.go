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

	var extra []string
	if *capPPS > 0 {
		extra = []string{"-capacity-pps", strconv.FormatFloat(*capPPS, 'f', -1, 64)}
	}
	conv, err := brokerbench.StartConvene(bin, filepath.Join(br.tmp, "node"), extra...)
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
	nats, notes, ok := startPeers("overload", *peers, stderr)
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
		MaxListeners: (loadgen.FileLimit() - 512) / 2, // a peer's listener is a connection: two sockets here and there
		Log: func(f string, a ...any) {
			fmt.Fprintf(stderr, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	src := "measured by the node"
	if *capPPS > 0 {
		src = "configured (capacity.pps)"
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
