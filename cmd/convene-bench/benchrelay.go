package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/brokerbench"
	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/relaybench"
)

// benchRelayCmd measures Convene's RTP relay (a `convene relay` child
// process) beside rtpengine (userspace)
// and the machine probe, and writes <out>/<date>-relay.md and .json. Like
// every benchmark it holds the benchmark lock (see lockBench).
func benchRelayCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	systems := fs.String("systems", "convene,convene-userspace,rtpengine", "relays to measure, in order: convene (kernel fast path), convene-userspace (relay.kernel off), rtpengine (package rtpengine-daemon, user space)")
	sizes := fs.String("sizes", "1,64,172,512,1024", "packet sizes (UDP payload bytes) for the throughput table; empty skips it")
	budget := fs.Duration("budget", 9*time.Minute, "time for the whole run (at most 10m)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("relay", *server, stderr)
	if bin == "" {
		return 1
	}
	lock := lockBench("relay", *wait, stderr)
	if lock == nil {
		return 1
	}
	defer lock.Close()
	*budget = min(*budget, 10*time.Minute)
	// The generator's sending and receiving threads are locked to their
	// goroutines and block in system calls; spare Ps let each come back
	// from one at once instead of waiting for sysmon to free a P.
	runtime.GOMAXPROCS(max(8, runtime.NumCPU()))
	var sizeList []int
	if *sizes != "" {
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1400 {
				fmt.Fprintf(stderr, "convene-bench relay: bad packet size %q (want 1..1400)\n", f)
				return 2
			}
			sizeList = append(sizeList, n)
		}
	}
	_ = loadgen.FileLimit() // thousands of endpoint sockets; the relays inherit the limit
	tmp := benchDirs("relay", *out, stderr)
	if tmp == "" {
		return 1
	}
	defer os.RemoveAll(tmp)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var notes []string
	var probe func(context.Context, int, int) (relaybench.ProbePoint, error)
	if probeBin, err := brokerbench.BuildProbe(tmp); err != nil {
		notes = append(notes, "probe not run: "+err.Error())
	} else {
		probe = func(ctx context.Context, subs, size int) (relaybench.ProbePoint, error) {
			p, err := brokerbench.RunProbe(ctx, probeBin, subs, size, 3)
			if err != nil {
				return relaybench.ProbePoint{}, err
			}
			rp, err := brokerbench.RunRelayProbe(ctx, probeBin, subs, size, 3)
			return relaybench.ProbePoint{Subscribers: subs, SentPPS: p.SentPPS, DeliveredPPS: p.DeliveredPPS, RelayPPS: rp.DeliveredPPS}, err
		}
	}
	start := time.Now()
	res := relaybench.Run(ctx, relaybench.Options{ConveneBin: bin, Probe: probe, Systems: strings.Split(*systems, ","), Sizes: sizeList, Budget: *budget,
		Log: func(f string, a ...any) {
			fmt.Fprintf(stderr, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	res.Notes = append(notes, res.Notes...)
	md, js, err := relaybench.WriteReport(*out, res)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench relay: writing the report:", err)
		return 1
	}
	fmt.Fprintln(stdout, relaybench.FormatTables(res))
	for _, n := range res.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintf(stdout, "report: %s\n        %s\n", md, js)
	if ctx.Err() != nil {
		return 1
	}
	return 0
}
