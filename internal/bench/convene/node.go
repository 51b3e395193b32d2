// Package convene runs a `convene serve` node as a child process for the
// benchmarks that measure it over its API: a fresh data directory, free
// ports on loopback, a known API key, pprof on, optionally pinned to the
// benchmark's server CPU.
package convene

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/proc"
)

// Node is a `convene serve` child process.
type Node struct {
	URL     string // http://127.0.0.1:port
	Key     string // the operator API key
	Version string
	cmd     *exec.Cmd
	mu      sync.Mutex
	log     bytes.Buffer
}

// Options say how to run the node.
type Options struct {
	Bin string // the convene binary
	Tmp string // parent of its data directory
	// Pin runs it on the benchmark's server CPU (proc.OnServerCPU).
	Pin bool
	// Nice is its niceness (proc.Nice); 0 leaves it alone.
	Nice int
	// Args are added to `convene serve`.
	Args []string
	// Env is added to its environment (CONVENE_…=…).
	Env []string
}

// FreeTCP returns a TCP port free on 127.0.0.1 just now.
func FreeTCP() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeUDP returns a UDP port free on 127.0.0.1 just now.
func FreeUDP() int {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// Start starts a node and waits until it answers /healthz.
func Start(o Options) (*Node, error) {
	dir, err := os.MkdirTemp(o.Tmp, "node-")
	if err != nil {
		return nil, err
	}
	n := &Node{Key: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	port := FreeTCP()
	n.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	n.cmd = exec.Command(o.Bin, "serve", "-data-dir", dir, "-http-addr", "127.0.0.1:"+strconv.Itoa(port), "-rtp-port", "0",
		"-sip-listen", "127.0.0.1:0", "-webrtc-udp-port", strconv.Itoa(FreeUDP()), "-auth-api-keys", n.Key,
		"-sessions-max-members", "5000", "-http-ws-max-per-session", "5000", "-log-level", "warn", "-http-pprof")
	n.cmd.Args = append(n.cmd.Args, o.Args...)
	n.cmd.Env = append(os.Environ(), o.Env...)
	if o.Pin {
		proc.OnServerCPU(n.cmd)
	}
	proc.Nice(n.cmd, o.Nice)
	n.cmd.Stdout, n.cmd.Stderr = n, n
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	out, _ := exec.Command(o.Bin, "version").Output()
	n.Version = strings.TrimSpace(string(out))
	for range 100 {
		if resp, err := http.Get(n.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.Stop()
	return nil, fmt.Errorf("convene did not start: %s", n.Log())
}

// Write collects the node's output (its log).
func (n *Node) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.Write(p)
}

// Log returns what the node has printed so far.
func (n *Node) Log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

// PID returns the process ID.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Stop ends the node.
func (n *Node) Stop() { proc.Stop(n.cmd, 5*time.Second) }

// Profile saves a CPU profile of the node over the next seconds to path.
func (n *Node) Profile(seconds int, path string) {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", n.URL, max(1, seconds)))
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if f, err := os.Create(path); err == nil {
		io.Copy(f, resp.Body)
		f.Close()
	}
}

// API does one request with the operator key: body as JSON, the answer
// decoded into out (when not nil); a status of 300 or more is an error.
func (n *Node) API(method, path string, body any, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, n.URL+path, bytes.NewReader(b))
	req.Header.Set("X-API-Key", n.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		m, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, m)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// scrape gives each line of the node's /metrics to f; false when the node
// does not answer.
func (n *Node) scrape(f func(line string)) bool {
	req, _ := http.NewRequest("GET", n.URL+"/metrics", nil)
	req.Header.Set("X-API-Key", n.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	return true
}

// sample splits a /metrics line of metric name into its labels ("" when
// none) and value; ok is false for another metric's line.
func sample(line, name string) (labels string, v float64, ok bool) {
	rest, found := strings.CutPrefix(line, name)
	if !found || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
		return "", 0, false
	}
	if rest[0] == '{' {
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return "", 0, false
		}
		labels, rest = rest[1:end], rest[end+1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return labels, v, err == nil
}

// Metric returns the sum of the samples of the Prometheus metric name on
// the node's /metrics (a counter or gauge; every label set of it), and
// false when the node does not answer or has no such metric.
func (n *Node) Metric(name string) (float64, bool) {
	var sum float64
	found := false
	n.scrape(func(line string) {
		if _, v, ok := sample(line, name); ok {
			sum += v
			found = true
		}
	})
	return sum, found
}

// Samples returns the samples of the metric name by their labels (as
// they appear between the braces, "" when none); nil when the node does
// not answer.
func (n *Node) Samples(name string) map[string]float64 {
	out := map[string]float64{}
	if !n.scrape(func(line string) {
		if labels, v, ok := sample(line, name); ok {
			out[labels] += v
		}
	}) {
		return nil
	}
	return out
}

// Histogram returns the histogram name's cumulative counts by upper bound
// (its name_bucket samples, every label set summed; +Inf included), nil
// when the node does not answer.
func (n *Node) Histogram(name string) map[float64]float64 {
	out := map[float64]float64{}
	if !n.scrape(func(line string) {
		labels, v, ok := sample(line, name+"_bucket")
		if !ok {
			return
		}
		_, le, _ := strings.Cut(labels, `le="`)
		le, _, _ = strings.Cut(le, `"`)
		if bound, err := strconv.ParseFloat(le, 64); err == nil { // "+Inf" parses as +Inf
			out[bound] += v
		}
	}) {
		return nil
	}
	return out
}

// HistogramPct is the p-th percentile, in ms, of what a histogram in
// seconds (Histogram) counted between snapshots a and b, as the upper
// bound of the bucket it falls in; 0 when it counted nothing. In the
// +Inf bucket it is the negative of the last finite bound: more than
// that (JSON has no infinity, and a report that could not be written
// lost a whole run once). BoundMs spells it.
func HistogramPct(a, b map[float64]float64, p float64) float64 {
	var bounds []float64
	for k := range b {
		bounds = append(bounds, k)
	}
	if len(bounds) == 0 {
		return 0
	}
	sort.Float64s(bounds)
	total := b[bounds[len(bounds)-1]] - a[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	for i, k := range bounds {
		if b[k]-a[k] >= p*total {
			if math.IsInf(k, 1) {
				if i == 0 {
					return 0
				}
				return -bounds[i-1] * 1000
			}
			return k * 1000
		}
	}
	return bounds[len(bounds)-1] * 1000
}

// HistogramOver is how many of what a histogram in seconds counted between
// snapshots a and b were over bound seconds (a bucket bound of it).
func HistogramOver(a, b map[float64]float64, bound float64) float64 {
	total := b[math.Inf(1)] - a[math.Inf(1)]
	if _, ok := b[bound]; !ok || total <= 0 {
		return 0
	}
	return total - (b[bound] - a[bound])
}

// BoundMs spells a HistogramPct: "≤ 10", "> 1000" past the last finite
// bucket, "–" when nothing was counted.
func BoundMs(ms float64) string {
	switch {
	case ms > 0:
		return fmt.Sprintf("≤ %g", ms)
	case ms < 0:
		return fmt.Sprintf("> %g", -ms)
	}
	return "–"
}
