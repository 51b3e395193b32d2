package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/brokerbench"
	"github.com/convene/convene/internal/bench/loadgen"
)

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
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *dur > 10*time.Minute || *listeners < 1 || *meetings < 1 || *listeners**meetings > 50000 {
		fmt.Fprintln(stderr, "convene-bench load: keep duration ≤ 10m, listeners ≥ 1, meetings ≥ 1 and at most 50000 listeners in all")
		return 2
	}
	var plan []brokerbench.Meeting
	for i := 0; i < *meetings; i++ {
		switch *kind {
		case "audio":
			plan = append(plan, brokerbench.Meeting{Kind: loadgen.Audio, Listeners: *listeners})
		case "video":
			plan = append(plan, brokerbench.Meeting{Kind: loadgen.Video, Listeners: *listeners})
		case "both":
			plan = append(plan, brokerbench.Meeting{Kind: loadgen.Audio, Listeners: *listeners}, brokerbench.Meeting{Kind: loadgen.Video, Listeners: *listeners})
		default:
			fmt.Fprintf(stderr, "convene-bench load: kind must be audio, video or both, not %q\n", *kind)
			return 2
		}
	}
	if *key == "" {
		fmt.Fprintln(stderr, "convene-bench load: needs the node's API key to create links: -api-key KEY or CONVENE_API_KEY (`convene serve` prints it; it is kept in <data_dir>/api_key)")
		return 2
	}
	c, err := brokerbench.AttachConvene(*url, *key)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench load:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pt := brokerbench.RunPoint(ctx, c, "load", plan, *dur)
	if pt.Error != "" {
		fmt.Fprintln(stderr, "convene-bench load:", pt.Error)
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
