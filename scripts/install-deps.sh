#!/usr/bin/env bash
# Installs what Convene needs on Debian 12: Go modules for `run`, plus the
# real peers the tests drive (ffmpeg, iproute2, SIPp, baresip, rtpengine,
# PostgreSQL, VLC)
# and Janus and Chromium for `test`, the benchmark's peers (Kamailio,
# rtpengine, Janus, ffmpeg and nginx) for `bench`, and
# what the README's examples use (curl, a WebSocket client) for `examples`.
# Installs only what is missing; needs root (or sudo) for apt-get.
set -euo pipefail
what=${1:-run}
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
  echo "Go is required (https://go.dev/dl/); the module needs Go $(awk '/^go /{print $2}' go.mod)." >&2
  exit 1
fi
go mod download

apt_pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || apt_pkgs+=("$2"); }
# The mixer's Opus goes through cgo to libopus (gopkg.in/hraban/opus.v2,
# which also links libopusfile): every build needs them.
need cc gcc
need pkg-config pkg-config
pkg-config --exists opus 2>/dev/null || apt_pkgs+=(libopus-dev)
pkg-config --exists opusfile 2>/dev/null || apt_pkgs+=(libopusfile-dev)
# G.722 (wideband phones) goes through cgo to spandsp's codec.
pkg-config --exists spandsp 2>/dev/null || apt_pkgs+=(libspandsp-dev)
if [ "$what" = test ]; then
  need ffmpeg ffmpeg
  # The video composites draw members' names in DejaVu Sans (drawtext).
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || apt_pkgs+=(fonts-dejavu-core)
  need ip iproute2
  need tc iproute2 # netem, where the kernel has it (TestChatUnderDelayAndLoss)
  need nats-server nats-server
  # The catalog's and the cluster tests' throwaway PostgreSQL (initdb and
  # postgres, run as the package's postgres user; testutil.StartPostgres).
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_pkgs+=(postgresql)
  need sipp sip-tester
  need baresip baresip-core
  need rtpengine rtpengine-daemon # relaybench's own test drives it
  need janus janus                # rtcbench's own test drives it
  need chromium chromium          # the web app's tests click through it
  # VLC, a player without LL-HLS, plays the node's HLS (TestVLCPlaysTheStream):
  # cvlc, and the plugins with its HLS, MP4, H.264 and Opus.
  need cvlc vlc-bin
  dpkg -s vlc-plugin-base >/dev/null 2>&1 || apt_pkgs+=(vlc-plugin-base)
  need node nodejs
fi
if [ "$what" = bench ]; then
  need janus janus
  need sipp sip-tester
  need kamailio kamailio
  need rtpengine rtpengine-daemon
  # convene-bench media: the composites' and HLS's ffmpeg, and Debian's
  # nginx serving ffmpeg's own HLS segments beside the node's.
  need ffmpeg ffmpeg
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || apt_pkgs+=(fonts-dejavu-core)
  need nginx nginx
fi
if [ "$what" = examples ]; then
  need curl curl
  /usr/bin/python3 -c 'import websockets' >/dev/null 2>&1 || apt_pkgs+=(python3-websockets)
fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${apt_pkgs[*]} with apt-get" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi
