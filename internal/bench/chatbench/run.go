package chatbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/chat"
)

// The bar a step must pass.
const (
	maxP99 = 100 * time.Millisecond
	// keptUp is the share of the offered messages the members must have
	// sent for a step to count: less, and the load, not the node, was
	// the limit.
	keptUp = 0.95
)

// Config is one run.
type Config struct {
	Convene string  // the server binary
	Members []int   // members a session, one series each (10, 100)
	Rates   []int   // offered messages a second across all members, growing
	Rate    float64 // the most one member sends a second (under chat.Rate)
	Size    int     // payload bytes (a chat line)
	Window  time.Duration
	Drain   time.Duration // the longest wait for a step's last deliveries
	Budget  time.Duration // for the whole run, shared equally by the series
	Tmp     string
	Log     io.Writer
	// Out receives the report; with Profile, a CPU profile of the node
	// over each step's window too (<date>-chat-<members>m-<rate>.pprof).
	Out     string
	Profile bool
	// Pin gives the node CPU 0 to itself and runs the members on the
	// others.
	Pin       bool
	ServeArgs []string
	Notes     []string
}

// Point is one step: Offered messages a second across Sessions sessions.
type Point struct {
	Offered   int     `json:"offered_msgs_per_s"`
	Sessions  int     `json:"sessions"`
	PerMember float64 `json:"msgs_per_s_per_member"`
	Seconds   float64 `json:"seconds"`
	Sent      uint64  `json:"sent"`
	Refused   uint64  `json:"refused"`
	// Refusal is a refusal's code (rate_limited, unavailable…).
	Refusal string `json:"refusal,omitempty"`
	// Accepted and Deliveries are a second, over the sending.
	Accepted   float64 `json:"accepted_msgs_per_s"`
	Deliveries float64 `json:"deliveries_per_s"`
	// Expected deliveries are the accepted messages times the other
	// members of their session; Lost the ones not read within the
	// drain after the last send (on TCP: still queued, not dropped).
	Expected uint64 `json:"expected_deliveries"`
	Received uint64 `json:"received_deliveries"`
	Lost     uint64 `json:"lost_deliveries"`
	// Gone are sockets the node hung up on (too slow) or that failed.
	Gone int `json:"sockets_gone"`
	// E2E is send → each receiver's socket read; Order is delivery −
	// arrival in the receivers' conversation.Receiver.
	E2E   Latency `json:"e2e"`
	Order Latency `json:"ordering"`
	// Late and Expired are deliveries with an exception (never expected
	// on TCP unless the node is seconds behind).
	Late    uint64  `json:"late"`
	Expired uint64  `json:"expired"`
	Context float64 `json:"context_bytes_per_msg"`
	// CPU is the node's, in cores, from the first send until the step
	// drained; the per-core rates are per CPU second of the node.
	CPU               float64 `json:"node_cpu_cores"`
	MsgsPerCore       float64 `json:"msgs_per_s_per_core"`
	DeliveriesPerCore float64 `json:"deliveries_per_s_per_core"`
	LoadCPU           float64 `json:"load_cpu_cores"`
	MachineBusy       float64 `json:"machine_busy_pct"`
	Steal             float64 `json:"steal_pct"`
	OK                bool    `json:"ok"`
	Why               string  `json:"why,omitempty"`
	Profile           string  `json:"profile,omitempty"`
	// Where is how the profile's samples divide (see where).
	Where []Share `json:"where,omitempty"`
}

// Series is sessions of one size.
type Series struct {
	Members int `json:"members_per_session"`
	// Joins are dial → hello of every member's first join.
	Joins  Latency `json:"join"`
	Points []Point `json:"points"`
	// MaxOK is the highest offered rate that passed (0: none).
	MaxOK int    `json:"max_ok_msgs_per_s"`
	Note  string `json:"note,omitempty"`
}

// Result is a whole run.
type Result struct {
	Date    time.Time `json:"date"`
	Host    string    `json:"host"`
	CPUs    int       `json:"cpus"`
	Version string    `json:"version"`
	Window  string    `json:"window"`
	Drain   string    `json:"drain"`
	Rate    float64   `json:"max_msgs_per_s_per_member"`
	Size    int       `json:"payload_bytes"`
	Pinned  bool      `json:"pinned"`
	Series  []Series  `json:"series"`
	Floor   *Floor    `json:"floor,omitempty"`
	Notes   []string  `json:"notes,omitempty"`
}

// Run measures each series on a node of its own.
func Run(ctx context.Context, cfg Config) (Result, error) {
	host, _ := os.Hostname()
	res := Result{Date: time.Now().UTC(), Host: host, CPUs: runtime.NumCPU(), Window: cfg.Window.String(), Drain: cfg.Drain.String(), Rate: cfg.Rate, Size: cfg.Size}
	if cfg.Rate <= 0 || cfg.Rate > chat.Rate {
		return res, fmt.Errorf("a member's rate %.0f/s: it must be above 0 and at most the node's cap, %d/s", cfg.Rate, chat.Rate)
	}
	if cfg.Pin {
		if err := proc.PinSelf(); err != nil {
			return res, err
		}
		res.Pinned = true
	}
	res.Floor = latestFloor(cfg.Out)
	res.Notes = cfg.Notes
	share := cfg.Budget / time.Duration(max(1, len(cfg.Members)))
	for _, size := range cfg.Members {
		s, version, err := runSeries(ctx, cfg, size, time.Now().Add(share))
		if version != "" {
			res.Version = version
		}
		if err != nil {
			s.Note = err.Error()
			fmt.Fprintf(cfg.Log, "  %d members: %v\n", size, err)
		}
		res.Series = append(res.Series, s)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	return res, nil
}

// session is one session's members.
type session struct {
	id      string
	members []*member
}

func runSeries(ctx context.Context, cfg Config, size int, end time.Time) (Series, string, error) {
	s := Series{Members: size}
	n, err := convene.Start(convene.Options{Bin: cfg.Convene, Tmp: cfg.Tmp, Pin: cfg.Pin, Args: cfg.ServeArgs})
	if err != nil {
		return s, "", err
	}
	defer n.Stop()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sessions []*session
	defer func() {
		for _, ss := range sessions {
			for _, m := range ss.members {
				m.close()
			}
		}
	}()
	var joins hist
	var step uint16 // each series has a node and members of its own
	for _, rate := range cfg.Rates {
		if time.Now().Add(cfg.Window + cfg.Drain + 10*time.Second).After(end) {
			s.Note = fmt.Sprintf("stopped before %d msg/s: out of time budget", rate)
			break
		}
		want := int(math.Ceil(float64(rate) / (float64(size) * cfg.Rate)))
		t0 := time.Now()
		for len(sessions) < want {
			ss, err := addSession(rctx, n, size, len(sessions), &joins)
			if ss != nil {
				sessions = append(sessions, ss) // closed when done, even in part
			}
			if err != nil {
				return s, n.Version, err
			}
		}
		s.Joins = joins.latency()
		fmt.Fprintf(cfg.Log, "  %d members: %d sessions ready in %v\n", size, want, time.Since(t0).Round(time.Millisecond))
		step++
		p := measure(rctx, cfg, n, sessions[:want], step, rate)
		s.Points = append(s.Points, p)
		logPoint(cfg.Log, size, p)
		if !p.OK {
			break
		}
		s.MaxOK = rate
	}
	return s, n.Version, ctx.Err()
}

// addSession creates session i with size members, one after another,
// each on its socket.
func addSession(ctx context.Context, n *convene.Node, size, i int, joins *hist) (*session, error) {
	var sr struct{ ID string }
	if err := n.API("POST", "/api/v1/sessions", map[string]string{"name": "chat-" + strconv.Itoa(i)}, &sr); err != nil {
		return nil, err
	}
	ss := &session{id: sr.ID}
	for k := range size {
		m, err := addMember(ctx, n, sr.ID, "m"+strconv.Itoa(k))
		if err != nil {
			return ss, fmt.Errorf("session %d, member %d: %w", i, k, err)
		}
		joins.add(m.join)
		ss.members = append(ss.members, m)
	}
	return ss, nil
}

// ticker ticks the members' Receivers, for deadlines, until stop.
func ticker(members []*member, stop <-chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			for _, m := range members {
				m.tick(now)
			}
		}
	}
}

// sample is the CPU counters at one moment.
type sample struct {
	node, self float64
	machine    proc.CPU
	at         time.Time
}

func sampleNow(pid int) sample {
	var s sample
	_, s.node, _ = proc.Process(pid)
	_, s.self, _ = proc.Process(os.Getpid())
	s.machine, _ = proc.ReadCPU()
	s.at = time.Now()
	return s
}

// measure offers rate messages a second across the sessions' members for
// the window, waits for the deliveries and says how it went.
func measure(ctx context.Context, cfg Config, n *convene.Node, sessions []*session, step uint16, rate int) Point {
	p := Point{Offered: rate, Sessions: len(sessions)}
	var all []*member
	for _, ss := range sessions {
		all = append(all, ss.members...)
	}
	p.PerMember = float64(rate) / float64(len(all))
	for _, m := range all {
		m.begin(step)
	}
	stop := make(chan struct{})
	defer close(stop)
	go ticker(all, stop)
	var prof sync.WaitGroup
	if cfg.Profile && cfg.Out != "" {
		p.Profile = fmt.Sprintf("%s-chat-%dm-%d.pprof", time.Now().UTC().Format("2006-01-02-150405"), len(sessions[0].members), rate)
		path := filepath.Join(cfg.Out, p.Profile)
		prof.Go(func() { n.Profile(int(cfg.Window.Seconds()), path) })
	}
	a := sampleNow(n.PID())
	until := a.at.Add(cfg.Window)
	var senders sync.WaitGroup
	for _, m := range all {
		senders.Go(func() { m.send(ctx, step, p.PerMember, cfg.Size, until) })
	}
	senders.Wait()
	sent := time.Now()
	// Until every accepted message reached every other member, or Drain.
	var cs []counts
	for {
		cs = cs[:0]
		var expected, received uint64
		for _, ss := range sessions {
			for _, m := range ss.members {
				c := m.snapshot()
				cs = append(cs, c)
				expected += (c.sent - min(c.sent, c.refused)) * uint64(len(ss.members)-1)
				received += c.received
			}
		}
		if received >= expected || time.Since(sent) > cfg.Drain || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := sampleNow(n.PID())
	prof.Wait()
	if p.Profile != "" {
		p.Where = where(filepath.Join(cfg.Out, p.Profile))
	}
	var e2e, order hist
	var ctxBytes uint64
	i := 0
	for _, ss := range sessions {
		for _, m := range ss.members {
			c := &cs[i]
			i++
			p.Sent += c.sent
			p.Refused += c.refused
			if c.lastRefusal != "" {
				p.Refusal = c.lastRefusal
			}
			p.Expected += (c.sent - min(c.sent, c.refused)) * uint64(len(ss.members)-1)
			p.Received += c.received
			p.Late += c.late
			p.Expired += c.expired
			ctxBytes += c.ctxBytes
			e2e.merge(&c.e2e)
			order.merge(&c.order)
			if m.gone.Load() {
				p.Gone++
			}
		}
	}
	p.Lost = p.Expected - min(p.Expected, p.Received)
	p.E2E, p.Order = e2e.latency(), order.latency()
	if p.Sent > 0 {
		p.Context = float64(ctxBytes) / float64(p.Sent)
	}
	p.Seconds = sent.Sub(a.at).Seconds()
	if p.Seconds > 0 {
		p.Accepted = float64(p.Sent-min(p.Sent, p.Refused)) / p.Seconds
		p.Deliveries = float64(p.Received) / p.Seconds
	}
	if el := b.at.Sub(a.at).Seconds(); el > 0 {
		p.CPU = (b.node - a.node) / el
		p.LoadCPU = (b.self - a.self) / el
		p.MachineBusy, p.Steal = b.machine.Since(a.machine)
	}
	if cpu := b.node - a.node; cpu > 0 {
		p.MsgsPerCore = float64(p.Sent-min(p.Sent, p.Refused)) / cpu
		p.DeliveriesPerCore = float64(p.Received) / cpu
	}
	p.OK, p.Why = verdict(p, cfg.Window)
	return p
}

// verdict says whether a step passed, and why not.
func verdict(p Point, window time.Duration) (bool, string) {
	var why []string
	if p.Gone > 0 {
		why = append(why, fmt.Sprintf("%d sockets gone (hung up by the node as too slow)", p.Gone))
	}
	if p.Refused > 0 {
		why = append(why, fmt.Sprintf("%d refused (%s)", p.Refused, p.Refusal))
	}
	if p.Lost > 0 {
		why = append(why, fmt.Sprintf("%d deliveries missing after the drain", p.Lost))
	}
	if p.E2E.P99 >= float64(maxP99.Milliseconds()) {
		why = append(why, fmt.Sprintf("p99 %.1f ms", p.E2E.P99))
	}
	if offered := float64(p.Offered) * window.Seconds(); float64(p.Sent) < keptUp*offered {
		why = append(why, fmt.Sprintf("the members sent %d of %.0f: the load could not keep up", p.Sent, offered))
	}
	return len(why) == 0, strings.Join(why, "; ")
}

func logPoint(w io.Writer, size int, p Point) {
	fmt.Fprintf(w, "  %d members × %d sessions, %d msg/s offered: accepted %.0f/s, deliveries %.0f/s, e2e p50 %.2f p99 %.2f ms, ordering p50 %.0f p99 %.0f µs, missing %d, refused %d, gone %d, node %.2f cores (%.0f msg/s, %.0f deliveries/s a core), load %.2f cores, machine %.0f%% steal %.0f%%, ok=%v %s\n",
		size, p.Sessions, p.Offered, p.Accepted, p.Deliveries, p.E2E.P50, p.E2E.P99, 1000*p.Order.P50, 1000*p.Order.P99, p.Lost, p.Refused, p.Gone,
		p.CPU, p.MsgsPerCore, p.DeliveriesPerCore, p.LoadCPU, p.MachineBusy, p.Steal, p.OK, p.Why)
	if len(p.Where) > 0 {
		fmt.Fprintf(w, "    node's CPU: %s\n", shares(p.Where))
	}
}
