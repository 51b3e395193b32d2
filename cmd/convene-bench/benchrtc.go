package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/rtcbench"
)

// benchRTCCmd measures WebRTC forwarding beside Janus VideoRoom and writes
// <out>/<date>-webrtc.md and .json.
func benchRTCCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("webrtc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	systems := fs.String("systems", "convene,janus", "SFUs to measure: convene, janus (Debian's janus package, VideoRoom)")
	scenarios := fs.String("scenarios", "audio,av", "audio (Opus) and av (Opus and three-layer simulcast VP8)")
	stepList := fs.String("steps", "25,50,100,150,200,250,300,400,500,600,800,1000,1200,1500,2000", "subscriber counts, in order; a system stops at the first that misses the quality bar")
	window := fs.Duration("window", 10*time.Second, "measuring window of each step")
	budget := fs.Duration("budget", 28*time.Minute, "time for the whole run, shared equally by the series (system × scenario)")
	serveArgs := fs.String("serve-args", "", "more flags for `convene serve`, space-separated (e.g. \"-webrtc-udp-port 0\")")
	pin := fs.Bool("pin", runtime.NumCPU() >= 2, "give each server CPU 0 to itself and run the load process and the publisher on the other CPUs")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("webrtc", *server, stderr)
	if bin == "" {
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench webrtc:", err)
		return 1
	}
	steps, err := positiveInts(*stepList)
	if err != nil {
		fmt.Fprintf(stderr, "convene-bench webrtc: bad -steps: %v\n", err)
		return 2
	}
	h := holdBench("webrtc", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	res, err := rtcbench.Run(h.Ctx, rtcbench.Config{Convene: bin, Self: self, Systems: strings.Split(*systems, ","),
		Scenarios: strings.Split(*scenarios, ","), Steps: steps, Window: *window, Budget: *budget, Tmp: h.Tmp, Log: stdout, Out: *out, ServeArgs: strings.Fields(*serveArgs), Pin: *pin})
	return report("webrtc", stdout, stderr, err, func() (string, error) { return rtcbench.Write(*out, res) },
		func() string { return rtcbench.Format(res) })
}

// rtcLoadCmd is the benchmark's load process: it reads a LoadConfig as
// JSON on stdin, subscribes, prints "window start", then the result.
func rtcLoadCmd(args []string, stdout, stderr io.Writer) int {
	var cfg rtcbench.LoadConfig
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		fmt.Fprintln(stderr, "convene-bench rtc-load: config on stdin:", err)
		return 2
	}
	_ = loadgen.FileLimit()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := rtcbench.RunLoad(ctx, cfg, stdout, stdout); err != nil {
		fmt.Fprintln(stderr, "convene-bench rtc-load:", err)
		return 1
	}
	return 0
}
