package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/convene/convene/internal/bench/sipbench"
)

// benchSIPCmd runs `convene-bench sip`: the SIP registrar and proxy (a
// `convene serve` child process) beside Kamailio, driven by SIPp (make bench).
func benchSIPCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sip", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "`directory` for <date>-sip.md, .json and CPU profiles")
	point := fs.Duration("point", 5*time.Second, "SIPp run `duration` at each rate")
	budget := fs.Duration("budget", 18*time.Minute, "bound on the whole run")
	users := fs.Int("users", 1000, "number of SIP accounts registering")
	only := fs.String("only", "", "comma-separated workloads to run: reg_fresh,reg_reuse,call (default all)")
	kcfg := fs.String("kamailio-cfg", "bench/kamailio/kamailio.cfg", "Kamailio configuration `file`")
	server := conveneFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: convene-bench sip [flags]\n\nConvene's SIP registrar and proxy beside Kamailio, driven by SIPp (needs sipp and kamailio).")
		fs.PrintDefaults()
	}
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("sip", *server, stderr)
	if bin == "" {
		return 1
	}
	lock := lockBench("sip", *wait, stderr)
	if lock == nil {
		return 1
	}
	defer lock.Close()
	if _, err := os.Stat(*kcfg); err != nil {
		fmt.Fprintln(stderr, "convene-bench sip: kamailio config:", err)
		return 2
	}
	var list []string
	if *only != "" {
		list = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := sipbench.Run(ctx, sipbench.Options{Out: *out, Convene: bin, KamailioCfg: *kcfg, Point: *point,
		Budget: *budget, Users: *users, Only: list, Log: stdout})
	if rep != nil {
		fmt.Fprintln(stdout)
		rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "convene-bench sip:", err)
		return 1
	}
	return 0
}
