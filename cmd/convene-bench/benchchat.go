package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/chatbench"
)

// benchChatCmd measures a session's conversation through the node and
// writes <out>/<date>-chat.md and .json.
func benchChatCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json) and profiles; the newest *-floor.json there is quoted")
	members := fs.String("members", "10,100", "members a session, one series each")
	rates := fs.String("rates", "200,500,750,1000,1500,2000,3000,4000,6000,8000", "offered messages a second across all members, in order; a series stops at the first step that fails")
	rate := fs.Float64("member-rate", 80, "the most messages a second one member sends (the node's cap a socket is 100); more sessions when a step needs it")
	size := fs.Int("size", 64, "payload bytes of a message (a chat line; at least 10)")
	window := fs.Duration("window", 5*time.Second, "how long each step sends")
	drain := fs.Duration("drain", 3*time.Second, "the longest wait for a step's last deliveries")
	budget := fs.Duration("budget", 5*time.Minute, "time for the whole run, shared equally by the series")
	quick := fs.Bool("quick", false, "a short run: 2 s steps up to 2000 msg/s")
	profile := fs.Bool("profile", true, "save a CPU profile of the node over each step in -out")
	pin := fs.Bool("pin", false, "give the node CPU 0 to itself and run the members on the others")
	serveArgs := fs.String("serve-args", "", "more flags for `convene serve`, space-separated")
	note := fs.String("note", "", "a note for the report (the machine's state, say)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *quick {
		*window, *rates = 2*time.Second, "200,500,1000,2000"
	}
	bin := conveneBin("chat", *server, stderr)
	if bin == "" {
		return 1
	}
	sizes, err1 := positiveInts(*members)
	steps, err2 := positiveInts(*rates)
	if err := errors.Join(err1, err2); err != nil || *size < chatbench.StampLen {
		fmt.Fprintf(stderr, "convene-bench chat: bad -members, -rates or -size (≥ %d): %v\n", chatbench.StampLen, err)
		return 2
	}
	h := holdBench("chat", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	res, err := chatbench.Run(h.Ctx, chatbench.Config{Convene: bin, Members: sizes, Rates: steps, Rate: *rate, Size: *size,
		Window: *window, Drain: *drain, Budget: *budget, Tmp: h.Tmp, Log: stdout, Out: *out, Profile: *profile, Pin: *pin,
		ServeArgs: strings.Fields(*serveArgs), Notes: nonEmpty(*note)})
	if err != nil && len(res.Series) == 0 {
		fmt.Fprintln(stderr, "convene-bench chat:", err)
		return 1
	}
	path, werr := chatbench.Write(*out, res)
	if werr != nil {
		fmt.Fprintln(stderr, "convene-bench chat:", werr)
		return 1
	}
	fmt.Fprint(stdout, chatbench.Format(res))
	fmt.Fprintln(stdout, "report:", path)
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench chat:", err)
		return 1
	}
	return 0
}
