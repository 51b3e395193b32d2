package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/convene/convene/internal/bench/clusterbench"
	"github.com/convene/convene/internal/config"
)

// benchClusterCmd measures sessions spread over one, two and three nodes
// of a cluster and writes <out>/<date>-cluster.md and .json.
func benchClusterCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	sessions := fs.Int("sessions", 60, "R: sessions, each with one speaker")
	members := fs.Int("members", 20, "M: members of each session (the speaker and M-1 listeners)")
	warmup := fs.Duration("warmup", 5*time.Second, "warm-up of each layout before its window")
	window := fs.Duration("window", 20*time.Second, "measuring window of each layout")
	quick := fs.Bool("quick", false, "20 sessions, 8 s windows")
	profile := fs.Bool("profile", false, "save each node's CPU profile over each layout's window in -out")
	batch := fs.Duration("batch", config.Default().NATS.MediaBatch.Std(), "the nodes' nats.media_batch: how long a bridged packet waits for others to the same node")
	note := fs.String("note", "", "a note for the report (the machine's state, say)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *quick {
		*sessions, *window, *warmup = 20, 8*time.Second, 3*time.Second
	}
	if *sessions < 1 || *members < 2 {
		fmt.Fprintln(stderr, "convene-bench cluster: want -sessions ≥ 1 and -members ≥ 2")
		return 2
	}
	bin := conveneBin("cluster", *server, stderr)
	if bin == "" {
		return 1
	}
	h := holdBench("cluster", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	start := time.Now()
	res, err := clusterbench.Run(h.Ctx, clusterbench.Config{Convene: bin, Tmp: h.Tmp, Sessions: *sessions, Members: *members,
		Warmup: *warmup, Window: *window, Batch: *batch, Notes: nonEmpty(*note), Profile: profilePrefix(*profile, *out), Log: func(f string, a ...any) {
			fmt.Fprintf(stdout, "[%s] "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
		}})
	return report("cluster", stdout, stderr, err, func() (string, error) { return clusterbench.Write(*out, res) },
		func() string { return clusterbench.Format(res) })
}

// profilePrefix is where the cluster's profiles go: <out>/<time>-cluster.
func profilePrefix(on bool, out string) string {
	if !on {
		return ""
	}
	return filepath.Join(out, time.Now().Format("2006-01-02-150405")+"-cluster")
}
