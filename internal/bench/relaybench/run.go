package relaybench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
)

// Options configure a run.
type Options struct {
	ConveneBin string // the convene binary (runs `convene relay`)
	// Probe measures the machine's loopback limit for one packet size; nil
	// skips the probe.
	Probe func(ctx context.Context, subscribers, size int) (ProbePoint, error)
	// Systems to measure, in order: "convene", "rtpengine".
	Systems []string
	Sizes   []int         // packet sizes (UDP payload bytes)
	Budget  time.Duration // the whole run; calls bisection stops early to keep it
	Log     func(format string, args ...any)
}

// The seed's Table 2 packet sizes used by default, and its UDP figures.
var (
	DefaultSizes = []int{1, 64, 172, 512, 1024}
	SeedUDPPPS   = map[int]float64{1: 82410, 2: 82374, 4: 82998, 8: 83556, 16: 82264, 32: 66734, 64: 44208, 128: 35246,
		256: 23900, 512: 17372, 1024: 11318}
)

const (
	flows        = 64 // endpoints in the throughput test (32 calls, both directions)
	tputWarmup   = 300 * time.Millisecond
	tputMeasure  = 1500 * time.Millisecond
	portMin      = 16000
	portMax      = 59999
	callWarmup   = time.Second
	callMeasure  = 4 * time.Second
	callInterval = 20 * time.Millisecond
	callSize     = 172              // G.711 20 ms: 12-byte RTP header + 160 bytes
	maxCalls     = 4000             // the relays need 4 descriptors per call, the generator 2
	maxLag       = 5 * callInterval // a 100 ms burst: the machine is saturated
)

// ProbePoint is one run of the machine probe.
type ProbePoint struct {
	Size         int     `json:"packet_size"`
	Subscribers  int     `json:"subscribers"`
	SentPPS      float64 `json:"sent_pps"`
	DeliveredPPS float64 `json:"delivered_pps"`
	// RelayPPS is what the probe delivers through its minimal relay
	// thread (probe -R): the machine's ceiling for any relay.
	RelayPPS float64 `json:"relay_delivered_pps"`
}

// SizePoint is one relay's throughput at one packet size.
type SizePoint struct {
	Size         int     `json:"packet_size"`
	Datagram     int     `json:"datagram_bytes"` // sizes under 12 are sent as a bare 12-byte RTP header
	SentPPS      float64 `json:"sent_pps"`
	DeliveredPPS float64 `json:"delivered_pps"`
	XProbe       float64 `json:"x_probe"`
	XRelayProbe  float64 `json:"x_relay_probe"`
	CPUPercent   float64 `json:"relay_cpu_percent"` // of one core
	Error        string  `json:"error,omitempty"`
}

// CallStep is one point of the calls bisection.
type CallStep struct {
	Calls      int     `json:"calls"`
	Sent       uint64  `json:"sent"`     // packets sent in the measuring window
	Received   uint64  `json:"received"` // of those, received at the far end
	Misrouted  uint64  `json:"misrouted"`
	LossPct    float64 `json:"loss_pct"`
	LagMs      float64 `json:"generator_lag_ms"`
	CPUPercent float64 `json:"relay_cpu_percent"`
	SetupMs    float64 `json:"setup_ms"` // offer+answer for all calls
	Pass       bool    `json:"pass"`
	Error      string  `json:"error,omitempty"`
}

// SystemResult is everything measured on one relay.
type SystemResult struct {
	Name      string      `json:"name"`
	Version   string      `json:"version"`
	Sizes     []SizePoint `json:"sizes"`
	MaxCalls  int         `json:"max_calls_zero_loss"`
	Steps     []CallStep  `json:"call_steps"`
	RateSteps []RateStep  `json:"rate_steps"`
	Error     string      `json:"error,omitempty"`
}

// Result is a whole run.
type Result struct {
	Start   time.Time      `json:"start"`
	End     time.Time      `json:"end"`
	Host    string         `json:"host"`
	CPUs    int            `json:"cpus"`
	Probe   []ProbePoint   `json:"probe"`
	Systems []SystemResult `json:"systems"`
	Notes   []string       `json:"notes"`
}

// Run measures Convene's relay and, if asked, rtpengine.
func Run(ctx context.Context, o Options) *Result {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Budget <= 0 {
		o.Budget = 8 * time.Minute
	}
	host, _ := os.Hostname()
	res := &Result{Start: time.Now().UTC(), Host: host, CPUs: runtime.NumCPU()}
	deadline := time.Now().Add(o.Budget)

	if o.Probe != nil {
		sizes := o.Sizes
		if !slices.Contains(sizes, callSize) {
			sizes = append(slices.Clone(sizes), callSize) // for the calls table
		}
		for _, size := range sizes {
			p, err := o.Probe(ctx, flows, max(size, 12))
			if err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("probe at %d bytes: %v", size, err))
				continue
			}
			p.Size = size
			o.Log("probe %d B: %.0f pkt/s delivered, %.0f through its relay", size, p.DeliveredPPS, p.RelayPPS)
			res.Probe = append(res.Probe, p)
		}
	}

	type system struct {
		name  string
		start func() (*Relay, error)
	}
	var systems []system
	for _, name := range o.Systems {
		switch name {
		case "convene", "convene-userspace":
			kernel := name == "convene"
			systems = append(systems, system{name, func() (*Relay, error) {
				return StartConvene(name, o.ConveneBin, portMin, portMax, kernel)
			}})
		case "rtpengine":
			systems = append(systems, system{name, func() (*Relay, error) { return StartRTPEngine(portMin, portMax) }})
		default:
			res.Notes = append(res.Notes, fmt.Sprintf("unknown system %q skipped", name))
		}
	}
	for i, sys := range systems {
		if ctx.Err() != nil {
			break
		}
		sr := SystemResult{Name: sys.name}
		r, err := sys.start()
		if err != nil {
			sr.Error = err.Error()
			o.Log("%s: %v", sys.name, err)
			res.Systems = append(res.Systems, sr)
			continue
		}
		sr.Version = r.Version
		// Throughput gets half of this system's share of the time left.
		share := time.Until(deadline) / time.Duration(len(systems)-i)
		perSize := share / 2 / time.Duration(max(1, len(o.Sizes)))
		rate := 100000.0
		for _, size := range o.Sizes {
			if ctx.Err() != nil {
				break
			}
			pt, steps := throughput(r, size, rate, time.Now().Add(perSize))
			sr.RateSteps = append(sr.RateSteps, steps...)
			if pt.DeliveredPPS > 0 {
				rate = pt.DeliveredPPS
			}
			if p := res.probe(size); p > 0 {
				pt.XProbe = pt.DeliveredPPS / p
			}
			if p := res.relayProbe(size); p > 0 {
				pt.XRelayProbe = pt.DeliveredPPS / p
			}
			o.Log("%s %d B: %.0f pkt/s delivered of %.0f sent, relay CPU %.0f %% %s", sys.name, size, pt.DeliveredPPS,
				pt.SentPPS, pt.CPUPercent, pt.Error)
			sr.Sizes = append(sr.Sizes, pt)
		}
		// Share what is left of the budget among the systems still to run.
		left := time.Until(deadline) / time.Duration(len(systems)-i)
		sr.MaxCalls, sr.Steps = bisectCalls(ctx, r, time.Now().Add(left-5*time.Second), o.Log)
		r.Stop()
		res.Systems = append(res.Systems, sr)
	}
	res.Notes = append(res.Notes,
		"× probe: the probe moves each datagram through the kernel once (one send, one receive) with both CPUs to "+
			"itself; a relayed packet is received and sent twice (generator → relay → generator), and the generator "+
			"shares the same two CPUs. × relay probe compares with the same probe sending through a minimal C relay "+
			"thread (recvmmsg, then sendmmsg on; probe -R), which is the machine's ceiling for any user-space relay.",
		"convene forwards established flows in the kernel (relay.kernel, an eBPF program on the loopback "+
			"interface's ingress that rewrites and delivers each datagram; package kfwd): a relayed packet is then "+
			"sent once and received once, like the probe's, and its forwarding cost is spent in the sender's "+
			"system call, not in the relay process, so the relay CPU column shows only its user-space part. "+
			"The generator sends from two threads and the probe from one, so with the relay in the kernel "+
			"(where nothing is left for a relay process to do) convene can exceed 1 × probe. "+
			"convene-userspace is the same relay with relay.kernel off. rtpengine runs without its kernel module "+
			"(--table=-1), as the issue asks.",
		"Throughput rates are taken over the wall-clock time the measuring window really took, and a step passes "+
			"only when the generator sent at least 97 % of the asked rate with at most 0.1 % lost: a generator that "+
			"falls behind still sends every packet, later. A failed step is measured once more at the same rate "+
			"(for every system; marked \"measured again\"), and the second result stands. (Reports before 2026-11-22 10:45 took the rates over the "+
			"schedule's 1.5 s, which only loss could fail; the kernel path, which loses nothing, exposed that.)",
		"Calls pass with zero loss and the generator no more than 100 ms behind its schedule; past that the two CPUs "+
			"are saturated (relay + generator) and late packets leave in bursts, which is not the load asked for.")
	res.End = time.Now().UTC()
	return res
}

func (res *Result) relayProbe(size int) float64 {
	for _, p := range res.Probe {
		if p.Size == size {
			return p.RelayPPS
		}
	}
	return 0
}

func (res *Result) probe(size int) float64 {
	for _, p := range res.Probe {
		if p.Size == size {
			return p.DeliveredPPS
		}
	}
	return 0
}

// throughput finds the highest rate of size-byte packets the relay carries
// through 32 calls (64 flows, both directions) with at most 0.1 % loss:
// the rate grows by half until a step fails, then bisects to within 5 %.
func throughput(r *Relay, size int, rate float64, deadline time.Time) (SizePoint, []RateStep) {
	pt := SizePoint{Size: size, Datagram: max(size, 12)}
	var steps []RateStep
	lo, hi := 0.0, 0.0
	retried := false
	for len(steps) < 10 && time.Now().Before(deadline) {
		// Fresh calls for every step: rtpengine stops serving a stream it
		// found overloaded, and that must not spill into the next rate.
		cs, err := setupCalls(r, flows/2, fmt.Sprintf("tput-%d-%d", size, len(steps)))
		if err != nil {
			pt.Error = err.Error()
			return pt, steps
		}
		st := rateStep(r, cs.eps, size, rate)
		cs.close()
		st.Retry = retried
		steps = append(steps, st)
		// A step that fails is measured once more at the same rate, for
		// every system alike: one burst of the hypervisor's steal must not
		// cap the search. The second result stands.
		if !st.Pass && !retried {
			retried = true
			continue
		}
		retried = false
		if st.Pass {
			lo = rate
			pt.SentPPS, pt.DeliveredPPS, pt.CPUPercent = st.SentPPS, st.DeliveredPPS, st.CPUPercent
		} else {
			hi = rate
		}
		if hi > 0 && hi-lo <= 0.05*max(lo, hi/2) {
			break
		}
		if hi == 0 {
			rate *= 1.5
		} else {
			rate = (lo + hi) / 2
		}
	}
	if lo == 0 {
		pt.Error = fmt.Sprintf("no rate passed (lowest tried %.0f pkt/s)", rate)
	}
	return pt, steps
}

// RateStep is one offered rate of the throughput search.
type RateStep struct {
	Size         int     `json:"packet_size"`
	Rate         float64 `json:"rate"` // asked for, packets/s into the relay
	SentPPS      float64 `json:"sent_pps"`
	DeliveredPPS float64 `json:"delivered_pps"`
	LossPct      float64 `json:"loss_pct"`
	CPUPercent   float64 `json:"relay_cpu_percent"`
	LagMs        float64 `json:"generator_lag_ms"` // how far the generator fell behind its schedule at worst
	Pass         bool    `json:"pass"`
	Retry        bool    `json:"retry"` // the same rate measured again after a failure
}

func rateStep(r *Relay, eps []*endpoint, size int, rate float64) RateStep {
	st := RateStep{Size: size, Rate: rate}
	perEP := rate / float64(len(eps))
	from := uint32(perEP * tputWarmup.Seconds())
	rc := startReceiver(eps, from)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(tputWarmup)
		cpu0, t0 := r.CPUSeconds(), time.Now()
		time.Sleep(tputMeasure)
		st.CPUPercent = 100 * (r.CPUSeconds() - cpu0) / time.Since(t0).Seconds()
	}()
	lag, window := paceAll(eps, size, perEP, tputWarmup, tputWarmup+tputMeasure, from)
	<-done
	time.Sleep(200 * time.Millisecond)
	_ = rc.finish()
	var sent, misrouted uint64
	for _, e := range eps {
		sent += e.sentCounted
		misrouted += e.misrouted
	}
	// Over the time the window really took: a generator that fell behind
	// sent the same packets over a longer time.
	secs := max(window, tputMeasure).Seconds()
	st.LagMs = float64(lag.Microseconds()) / 1000
	st.SentPPS = float64(sent) / secs
	st.DeliveredPPS = float64(rc.counted) / secs
	if sent > 0 && rc.counted < sent {
		st.LossPct = 100 * float64(sent-rc.counted) / float64(sent)
	}
	st.Pass = misrouted == 0 && st.LossPct <= 0.1 && st.SentPPS >= 0.97*rate
	return st
}

// callStep runs n G.711 calls for the warm-up and the measuring window.
func callStep(r *Relay, n int) CallStep {
	st := CallStep{Calls: n}
	t0 := time.Now()
	cs, err := setupCalls(r, n, fmt.Sprintf("calls-%d", n))
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer cs.close()
	st.SetupMs = float64(time.Since(t0).Microseconds()) / 1000
	from := uint32(callWarmup / callInterval)
	rc := startReceiver(cs.eps, from)
	cpu0, c0 := r.CPUSeconds(), time.Now()
	lag, _ := paceAll(cs.eps, callSize, float64(time.Second/callInterval), callWarmup, callWarmup+callMeasure, from)
	cpu1, el := r.CPUSeconds(), time.Since(c0)
	time.Sleep(300 * time.Millisecond) // let the last packets arrive
	if err := rc.finish(); err != nil {
		st.Error = err.Error()
	}
	for _, e := range cs.eps {
		st.Sent += e.sentCounted
		st.Misrouted += e.misrouted
	}
	st.Received = rc.counted
	want := uint64(len(cs.eps)) * uint64(callMeasure/callInterval)
	if st.Sent > 0 && st.Received < st.Sent {
		st.LossPct = 100 * float64(st.Sent-st.Received) / float64(st.Sent)
	}
	st.LagMs = float64(lag.Microseconds()) / 1000
	st.CPUPercent = 100 * (cpu1 - cpu0) / el.Seconds()
	switch {
	case st.Error != "":
	case st.Sent < want:
		st.Error = fmt.Sprintf("generator sent %d of %d packets", st.Sent, want)
	case lag > maxLag:
		// Late packets go out in a burst: not the load asked for.
		st.Error = fmt.Sprintf("generator fell %.0f ms behind its schedule (machine saturated)", st.LagMs)
	}
	st.Pass = st.Error == "" && st.Received == st.Sent && st.Misrouted == 0
	return st
}

// bisectCalls finds the largest number of calls with zero loss: doubling
// from 250 until a step fails, then halving the interval until it is
// within 5 %, or until the deadline.
func bisectCalls(ctx context.Context, r *Relay, deadline time.Time, log func(string, ...any)) (int, []CallStep) {
	var steps []CallStep
	lo, hi, n := 0, 0, 250
	stepCost := 8 * time.Second
	for ctx.Err() == nil && time.Now().Add(stepCost).Before(deadline) {
		t0 := time.Now()
		st := callStep(r, n)
		stepCost = max(stepCost, time.Since(t0)+2*time.Second)
		steps = append(steps, st)
		log("%s %d calls: sent %d received %d loss %.3f %% lag %.1f ms relay CPU %.0f %% pass %v %s", r.Name, n,
			st.Sent, st.Received, st.LossPct, st.LagMs, st.CPUPercent, st.Pass, st.Error)
		if st.Pass {
			lo = n
		} else {
			hi = n
		}
		switch {
		case hi == 0 && n >= maxCalls:
			return lo, steps
		case hi == 0:
			n = min(2*n, maxCalls)
		default:
			if hi-lo <= max(25, lo/20) {
				return lo, steps
			}
			n = (lo + hi) / 2
		}
	}
	return lo, steps
}
