// Command convene-bench is Convene's benchmark and load tooling, built
// apart from the server so that `convene` carries none of its plotting and
// measuring code (make bench builds both into bin/).
//
//	convene-bench broker [flags]  the seed's broker scenarios beside nats-server
//	convene-bench overload [flags] single-audio and multi-video at 2× the node's capacity, joins continuing
//	convene-bench floor [flags]   floor request→grant and session create latency
//	convene-bench sip [flags]     SIP registrar and proxy beside Kamailio, driven by SIPp
//	convene-bench relay [flags]   RTP relay beside rtpengine and the machine probe
//	convene-bench load [flags]    drive a running node with the seed's streams
//	convene-bench webrtc [flags]  WebRTC subscribers beside Janus VideoRoom
//	convene-bench mixer [flags]   audio mixing beside Janus AudioBridge
//	convene-bench recorder [flags] recording beside Janus VideoRoom's recorder
//	convene-bench chat [flags]    conversations (chat) through the node
//	convene-bench cluster [flags] a session over one, two and three nodes: hop latency, cost model
//	convene-bench media [flags]   composites, thumbnails and HLS viewers beside ffmpeg and nginx
//
// The benchmarks run the server as child processes (`convene serve`,
// `convene relay`): the binary given by -convene, by default the `convene`
// beside this executable (bin/convene), else the one on PATH (see
// findConvene). The names `convene` had for them (bench, bench-floor,
// bench-sip, bench-relay) are accepted too.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: convene-bench <command> [flags]

commands:
  broker    the seed's broker scenarios against Convene and nats-server (make bench)
  overload  single-audio and multi-video at twice the node's capacity, joins continuing, beside nats-server (make bench)
  floor     floor request→grant latency over WebSocket and session create latency
  sip       the SIP registrar and proxy beside Kamailio, driven by SIPp (make bench)
  relay     the RTP relay beside rtpengine and the machine probe (make bench)
  load      drive a running node with the seed's audio/video streams and measure
  webrtc    WebRTC subscribers of one publisher beside Janus VideoRoom (make bench)
  mixer     audio mixing sessions of 10 members beside Janus AudioBridge (make bench)
  recorder  recorded streams at 128 kb/s and 5 Mb/s beside Janus VideoRoom's recorder (make bench)
  chat      conversations through the node: messages/s per core, latency, join (make bench)
  cluster   sessions over 1, 2 and 3 nodes of a cluster: node-hop latency, bytes and CPU per bridged packet, cost model (make bench)
  media     composites, thumbnails/s and HLS viewers beside plain ffmpeg and ffmpeg's HLS behind nginx (make bench)
  version   print the version

The benchmarks start the server binary given by -convene (default: the
convene beside this executable, else convene on PATH).
`)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "broker", "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "overload":
		return benchOverloadCmd(args[1:], stdout, stderr)
	case "floor", "bench-floor":
		return benchFloorCmd(args[1:], stdout, stderr)
	case "sip", "bench-sip":
		return benchSIPCmd(args[1:], stdout, stderr)
	case "relay", "bench-relay":
		return benchRelayCmd(args[1:], stdout, stderr)
	case "load":
		return loadCmd(args[1:], stdout, stderr)
	case "webrtc":
		return benchRTCCmd(args[1:], stdout, stderr)
	case "mixer":
		return benchMixCmd(args[1:], stdout, stderr)
	case "recorder":
		return benchRecCmd(args[1:], stdout, stderr)
	case "chat":
		return benchChatCmd(args[1:], stdout, stderr)
	case "cluster":
		return benchClusterCmd(args[1:], stdout, stderr)
	case "media":
		return benchMediaCmd(args[1:], stdout, stderr)
	case "rtc-load":
		return rtcLoadCmd(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "convene-bench", version)
		return 0
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "convene-bench: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}
