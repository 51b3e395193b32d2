package brokerbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// listenerBase is the first listener's address; the others follow it.
var listenerBase = netip.MustParseAddr("127.77.0.1")

// Convene is a convene node in its own process, driven through its REST API
// with plain RTP links.
type Convene struct {
	cmd    *exec.Cmd
	url    string
	rtp    netip.AddrPort
	client *http.Client
	stderr bytes.Buffer
	key    string // operator API key
}

// StartConvene runs `bin serve` on random ports with its data in dir.
func StartConvene(bin, dir string, pin bool, extraArgs ...string) (*Convene, error) {
	args := append([]string{"serve", "-http-addr", "127.0.0.1:0", "-rtp-port", "0", "-sip-listen", "127.0.0.1:0", "-webrtc-enabled=false", "-data-dir", dir,
		"-log-level", "warn", "-http-pprof"}, extraArgs...)
	c := &Convene{cmd: exec.Command(bin, args...), key: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	if pin {
		proc.OnServerCPU(c.cmd)
	}
	c.cmd.Stderr = &c.stderr
	c.cmd.Env = append(os.Environ(), "CONVENE_AUTH_API_KEYS="+c.key) // the operator key it sends
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("convene did not start: %v: %s", err, c.stderr.String())
	}
	m := regexp.MustCompile(`(http://[0-9.:]+).*RTP on ([0-9.:]+)`).FindStringSubmatch(line)
	if m == nil {
		c.Stop()
		return nil, fmt.Errorf("convene printed %q", line)
	}
	c.url = m[1]
	if c.rtp, err = netip.ParseAddrPort(m[2]); err != nil {
		c.Stop()
		return nil, err
	}
	go io.Copy(io.Discard, out)
	return c, nil
}

// Name implements System.
func (c *Convene) Name() string { return "convene" }

// URL returns the node's HTTP address.
func (c *Convene) URL() string { return c.url }

// Stop sends SIGTERM and waits.
// ownDelay reads the node's convene_media_forward_delay_seconds.
func (c *Convene) ownDelay() map[float64]float64 {
	return (&convene.Node{URL: c.url, Key: c.key}).Histogram("convene_media_forward_delay_seconds")
}

// readDelay reads the node's convene_media_receive_delay_seconds.
func (c *Convene) readDelay() map[float64]float64 {
	return (&convene.Node{URL: c.url, Key: c.key}).Histogram("convene_media_receive_delay_seconds")
}

// limit reads the node's governor from GET /api/v1/node.
func (c *Convene) limit() (string, float64) {
	var info struct {
		Capacity *struct {
			LimitedBy string  `json:"limited_by"`
			AdmitPPS  float64 `json:"admit_pps"`
		} `json:"capacity"`
	}
	if err := (&convene.Node{URL: c.url, Key: c.key}).API("GET", "/api/v1/node", nil, &info); err != nil || info.Capacity == nil {
		return "", 0
	}
	return info.Capacity.LimitedBy, info.Capacity.AdmitPPS
}

// drops reads the node's convene_media_dropped_packets_total.
func (c *Convene) drops() (int64, int) {
	v, ok := (&convene.Node{URL: c.url, Key: c.key}).Metric("convene_media_dropped_packets_total")
	if !ok {
		return -1, c.cmd.Process.Pid
	}
	return int64(v), c.cmd.Process.Pid
}

func (c *Convene) Stop() { proc.Stop(c.cmd, 15*time.Second) }

func (c *Convene) post(ctx context.Context, path string, body any, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", c.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.key)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *Convene) del(path string) {
	req, _ := http.NewRequest("DELETE", c.url+path, nil)
	req.Header.Set("X-API-Key", c.key)
	if resp, err := c.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// Prepare implements System: a session per meeting, a sendonly link for its
// speaker and a recvonly link per listener.
func (c *Convene) Prepare(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, error) {
	st, join, err := c.PrepareJoins(ctx, meetings, clock)
	if err != nil {
		return nil, err
	}
	jobs := make([]func() error, len(st.Listeners))
	for i := range jobs {
		jobs[i] = func() error { return join(ctx, i) }
	}
	if err := parallel(ctx, 8, jobs); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// PrepareJoins implements Joiner: the sessions and their speakers' links;
// a listener joins with a recvonly link, and a 503 over_capacity is
// ErrRefused.
func (c *Convene) PrepareJoins(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, func(context.Context, int) error, error) {
	st := &Setup{Listeners: newListeners(meetings)}
	var sessions []string
	var conns []*net.UDPConn
	var lis *loadgen.UDPListeners
	st.Close = func() {
		for _, s := range sessions {
			c.del("/api/v1/sessions/" + s)
		}
		for _, u := range conns {
			u.Close()
		}
		if lis != nil {
			lis.Close()
		}
	}
	fail := func(err error) (*Setup, func(context.Context, int) error, error) { st.Close(); return nil, nil, err }

	var err error
	// Every listener has an address of its own on two shared sockets
	// (see loadgen.UDPListeners); 32 MiB of buffer each holds a burst to
	// 16000 listeners.
	lis, err = loadgen.ListenUDP(listenerBase, st.Listeners, probeSockets, 32<<20, clock)
	if err != nil {
		return fail(err)
	}
	addrs := lis.Addrs()
	dst := net.UDPAddrFromAddrPort(c.rtp)
	type target struct{ path, kind string }
	targets := make([]target, 0, len(st.Listeners))
	for m, mt := range meetings {
		var sess struct{ ID string }
		if err := c.post(ctx, "/api/v1/sessions", map[string]string{"name": fmt.Sprintf("bench-%d", m)}, &sess); err != nil {
			return fail(err)
		}
		sessions = append(sessions, sess.ID)
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return fail(err)
		}
		conns = append(conns, conn)
		kind := mt.Kind.String()
		path := "/api/v1/sessions/" + sess.ID + "/rtp-links"
		// rtcp_mux: the speaker's socket takes its RTCP too (it reads
		// nothing). Without it the node would send RTCP to the next port,
		// which may be one of the node's own (a link is then refused).
		if err := c.post(ctx, path, map[string]any{"remote": conn.LocalAddr().String(), "kind": kind, "direction": "sendonly", "rtcp_mux": true}, nil); err != nil {
			return fail(err)
		}
		st.Speakers = append(st.Speakers, &loadgen.Speaker{Meeting: m, Stream: newStream(mt.Kind, m), SSRC: uint32(m + 1),
			Send: func(b []byte) error { _, err := conn.WriteToUDP(b, dst); return err }})
		for range mt.Listeners {
			targets = append(targets, target{path, kind})
		}
	}
	lis.Start()
	join := func(ctx context.Context, i int) error {
		err := c.post(ctx, targets[i].path, map[string]any{"remote": addrs[i].String(), "kind": targets[i].kind, "direction": "recvonly"}, nil)
		if err != nil && strings.Contains(err.Error(), ": 503 ") && strings.Contains(err.Error(), "over_capacity") {
			return fmt.Errorf("%w: %v", ErrRefused, err)
		}
		return err
	}
	return st, join, nil
}

// CapacityPPS is the node's delivery capacity (GET /api/v1/node).
func (c *Convene) CapacityPPS() (float64, error) {
	st, err := c.capacity()
	return st.CapacityPPS, err
}

// capacity reads the node's capacity figures from GET /api/v1/node.
func (c *Convene) capacity() (st struct {
	CapacityPPS float64 `json:"capacity_pps"`
	Shed        string  `json:"shed"`
}, err error) {
	req, _ := http.NewRequest("GET", c.url+"/api/v1/node", nil)
	req.Header.Set("X-API-Key", c.key)
	resp, err := c.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	var node struct {
		Capacity *struct {
			CapacityPPS float64 `json:"capacity_pps"`
			Shed        string  `json:"shed"`
		} `json:"capacity"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil || node.Capacity == nil {
		return st, fmt.Errorf("GET /api/v1/node: %v, capacity %v", err, node.Capacity != nil)
	}
	st.CapacityPPS, st.Shed = node.Capacity.CapacityPPS, node.Capacity.Shed
	return st, nil
}

// settle waits, up to two minutes, until the node sheds nothing: one that
// still sheds from the last scenario refuses every new link, the
// speakers' too.
func (c *Convene) settle(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := c.capacity()
		if err == nil && (st.Shed == "normal" || st.Shed == "") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node still sheds (%s) after 2 minutes: %v", st.Shed, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// parallel runs jobs on n workers and returns the first error.
func parallel(ctx context.Context, n int, jobs []func() error) error {
	ch := make(chan func() error)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := j(); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// Profile fetches a CPU profile of the node for the given time into path.
func (c *Convene) Profile(seconds int, path string) error {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.url, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// AttachConvene drives a node that is already running at url, with its
// API key.
func AttachConvene(url, key string) (*Convene, error) {
	c := &Convene{url: url, key: key, cmd: &exec.Cmd{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	req, err := http.NewRequest("GET", url+"/api/v1/node", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", key)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var node struct {
		RTPAddr string `json:"rtp_addr"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
		return nil, fmt.Errorf("%s/api/v1/node: %w", url, err)
	}
	if c.rtp, err = netip.ParseAddrPort(node.RTPAddr); err != nil {
		return nil, err
	}
	return c, nil
}
