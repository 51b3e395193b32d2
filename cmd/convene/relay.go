package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/relay/ng"
)

// relayCmd runs only the RTP relay with its ng control server, like an
// rtpengine daemon: the relay.* keys configure it (relay.ng_addr is
// required). `convene-bench relay` runs it beside rtpengine.
func relayCmd(args, env []string, stdout, stderr io.Writer) int {
	cfg, rest, err := config.Load("", env, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "usage: convene relay -relay-ng-addr host:port [flags]   (the relay.* keys apply)")
		config.PrintFlags(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "convene relay:", err)
		return 2
	}
	if len(rest) > 0 || cfg.Relay.NGAddr == "" {
		fmt.Fprintln(stderr, "convene relay: set -relay-ng-addr host:port (the ng control address); no other arguments")
		return 2
	}
	log := newLogger(cfg.Log, stderr)
	r, err := relay.New(relay.Options{Addr: cfg.Relay.Addr, PortMin: cfg.Relay.PortMin, PortMax: cfg.Relay.PortMax,
		Timeout: cfg.Relay.Timeout.Std(), Logger: log, Kernel: cfg.Relay.Kernel,
		MaxPacket: cfg.Relay.MaxPacket, LatchWindow: cfg.Relay.LatchWindow.Std(), MaxStreamsPerCall: cfg.Relay.MaxStreamsPerCall,
		MaxStreamsPerUser: cfg.Relay.MaxStreamsPerUser, MaxStreamsPerSource: cfg.Relay.MaxStreamsPerSource})
	if err != nil {
		log.Error("relay failed to start", "err", err)
		return 1
	}
	defer r.Close()
	s, err := ng.Listen(cfg.Relay.NGAddr, r, log)
	if err != nil {
		log.Error("ng control failed to start", "err", err)
		return 1
	}
	defer s.Close()
	fmt.Fprintf(stdout, "Convene relay is running: ng control on udp %s, media on %s ports %d-%d\n", s.Addr(),
		cfg.Relay.Addr, cfg.Relay.PortMin, cfg.Relay.PortMax)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return 0
}
