package brokerbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/convene/convene/bench/probe"
)

// BuildProbe compiles the machine probe (bench/probe/probe.c) with
// `cc -O2 -pthread` into dir and returns the executable's path.
//
// The C source is embedded in the Go binary (package bench/probe), not looked
// up on disk: BuildProbe writes it to dir/probe.c and compiles that, so it
// works the same under `go test` (whose working directory is the package's),
// from a binary run at the repository root, and from an installed binary run
// anywhere. It needs only a C compiler named cc on PATH (Linux).
func BuildProbe(dir string) (path string, err error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("building the probe needs a C compiler: %w", err)
	}
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, probe.Source, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "probe")
	out, err := exec.Command(cc, "-O2", "-pthread", "-o", bin, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cc -O2 -pthread -o %s %s: %v\n%s", bin, src, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// RunProbe runs the probe built by BuildProbe: one sending thread fans
// size-byte datagrams out round-robin to subscribers, one receiving thread
// drains them, and after a 1 s warm-up it
// counts for seconds. It returns the measured packets/s sent and delivered.
// The subscribers are shaped as the load generator's listeners (an address
// each in 127.0.0.0/8 on probeSockets shared sockets; see
// loadgen.UDPListeners), so that the probe and the benchmark's points put
// the same work on the receiving side.
// The probe stops by itself (about seconds+1 s); ctx can end it earlier.
// probeSockets is the number of shared receiving sockets, as in Convene's
// points (convene.go).
const probeSockets = 2

func RunProbe(ctx context.Context, bin string, subscribers, size int, seconds float64) (Probe, error) {
	return runProbe(ctx, bin, subscribers, size, seconds, false)
}

// RunRelayProbe is RunProbe through the probe's minimal relay (probe -R):
// the machine's limit for relaying, where every datagram is sent and
// received twice.
func RunRelayProbe(ctx context.Context, bin string, subscribers, size int, seconds float64) (Probe, error) {
	return runProbe(ctx, bin, subscribers, size, seconds, true)
}

func runProbe(ctx context.Context, bin string, subscribers, size int, seconds float64, relay bool) (Probe, error) {
	if subscribers < 1 || size < 1 || size > 65507 || !(seconds > 0) {
		return Probe{}, fmt.Errorf("probe: bad arguments: %d subscribers, %d-byte packets, %g s", subscribers, size, seconds)
	}
	args := []string{
		"-n", strconv.Itoa(subscribers),
		"-s", strconv.Itoa(size),
		"-t", strconv.FormatFloat(seconds, 'f', -1, 64),
		"-S", strconv.Itoa(probeSockets)}
	if relay {
		args = append(args, "-R")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return Probe{}, fmt.Errorf("probe: %v: %s", err, msg)
		}
		return Probe{}, fmt.Errorf("probe: %w", err)
	}
	p, err := parseProbe(stdout.Bytes(), subscribers, size)
	if err == nil && p.Relay != relay {
		err = fmt.Errorf("probe: asked for relay=%v, it reported relay=%v", relay, p.Relay)
	}
	return p, err
}

// parseProbe reads the probe's one line of JSON and checks that it describes
// the run that was asked for.
func parseProbe(out []byte, subscribers, size int) (Probe, error) {
	var p Probe
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Probe{}, fmt.Errorf("probe: reading its output %q: %w", bytes.TrimSpace(out), err)
	}
	switch {
	case p.Subscribers != subscribers || p.PacketSize != size:
		return Probe{}, fmt.Errorf("probe: reported %d subscribers and %d-byte packets, asked for %d and %d",
			p.Subscribers, p.PacketSize, subscribers, size)
	case !(p.Seconds > 0):
		return Probe{}, errors.New("probe: reported no measuring time")
	case p.SentPPS < 0 || p.DeliveredPPS < 0:
		return Probe{}, fmt.Errorf("probe: negative rates in %q", bytes.TrimSpace(out))
	}
	return p, nil
}
