// Command convene runs a Convene conferencing node and its tools.
//
//	convene serve [flags]   run a node (see `convene serve -h`)
//	convene users ...       SIP accounts (add, list, delete)
//	convene relay [flags]   the RTP relay alone, with its ng control server
//	convene version         print the version
//
// The benchmarks and the load generator are a separate binary,
// cmd/convene-bench, so that this one carries none of their code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/node"
	"github.com/convene/convene/internal/sip"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: convene <command> [flags]

commands:
  serve     run a node: HTTP API, media broker, embedded NATS, SQLite catalog
  users     SIP accounts: add, list, delete (passwords kept only as digests)
  recordings export  a recording to WebM, Ogg/Opus or WAV
  keys new  make a new operator API key (printed once; only its digest is kept)
  relay     the RTP relay alone with rtpengine's ng control protocol (-relay-ng-addr)
  version   print the version

Benchmarks and load generation: convene-bench (make bench).
`)
}

func run(args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], env, stdout, stderr)
	case "users":
		return usersCmd(args[1:], env, os.Stdin, stdout, stderr)
	case "recordings":
		return recordingsCmd(args[1:], env, stdout, stderr)
	case "keys":
		return keysCmd(args[1:], env, stdout, stderr)
	case "relay":
		return relayCmd(args[1:], env, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "convene", version)
		return 0
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "convene: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(args, env []string, stdout, stderr io.Writer) int {
	cfg, rest, err := config.Load("", env, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "usage: convene serve [flags]")
		config.PrintFlags(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "convene:", err)
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "convene: unexpected arguments %q\n", rest)
		return 2
	}
	log := newLogger(cfg.Log, stderr)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	// sipgo's transaction timers are process-wide: set once, here.
	sip.SetTimers(sip.Timers{})
	n, err := node.Start(context.Background(), cfg, log, version)
	if err != nil {
		log.Error("node failed to start", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "Convene is running: %s  (RTP on %s; Ctrl-C to stop)\n", n.URL(), n.RTPAddr())
	if key := n.GeneratedAPIKey(); key != "" {
		fmt.Fprintf(stdout, "API key: %s\n  (made at first start and shown only now: keep it; send it as X-API-Key.\n"+
			"   The node keeps only its digest, in %s; `convene keys new` makes another.)\n", key,
			filepath.Join(cfg.DataDir, node.APIKeyHashFile))
	}

	select {
	case sig := <-sigs:
		log.Info("signal received; draining (send it again to force)", "signal", sig.String())
	case err := <-n.Served():
		log.Error("http server stopped", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Std())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Drain(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			log.Error("drain", "err", err)
			return 1
		}
		return 0
	case sig := <-sigs:
		log.Warn("second signal: forcing exit", "signal", sig.String())
		return 1
	}
}
