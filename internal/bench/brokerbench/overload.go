package brokerbench

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// The overload mode (issue 19): a scenario driven to twice the Convene
// node's measured capacity with listeners joining all the while, on
// Convene (which admits up to capacity × (1 − headroom)) and on the peer
// (which admits everyone). For the listeners admitted before each window:
// late, lost, average latency; for the refused: how many and how fast.

// Overload scenario names.
const (
	OverloadAudio      = "overload-single-audio"
	OverloadMultiVideo = "overload-multi-video"
)

// overloadScenario is a scenario whose offered load grows by listeners.
type overloadScenario struct {
	name string
	// pps is what one listener receives, packets/s.
	pps  float64
	plan func(listeners int) []Meeting
}

func overloadScenarios() []overloadScenario {
	audioPPS := float64(time.Second) / float64(loadgen.AudioInterval)
	videoPPS := loadgen.VideoFPS * 3.1
	return []overloadScenario{
		{name: OverloadAudio, pps: audioPPS, plan: func(n int) []Meeting { return []Meeting{{loadgen.Audio, n}} }},
		{name: OverloadMultiVideo, pps: videoPPS, plan: func(n int) []Meeting {
			ms := repeat(Meeting{loadgen.Video, 19}, n/19)
			if n%19 > 0 {
				ms = append(ms, Meeting{loadgen.Video, n % 19})
			}
			return ms
		}},
	}
}

// OverloadNames lists the overload scenarios.
func OverloadNames() []string {
	var out []string
	for _, s := range overloadScenarios() {
		out = append(out, s.name)
	}
	return out
}

// OverloadOptions configure an overload run.
type OverloadOptions struct {
	Quick     bool
	Scenarios []string // empty: all
	// CapacityPPS is the Convene node's capacity; the offered load goes to
	// twice it.
	CapacityPPS float64
	// MaxFiles caps the listeners offered to systems that need an open
	// file per listener (Limited) to what this many open files allow; 0:
	// no cap.
	MaxFiles int
	// InStep starts every meeting's speaker at the same instant, so all
	// meetings send each frame together (a burst of every listener's
	// packets once a frame interval); by default the meetings' starts are
	// spread over one interval, as meetings people start at their own
	// times are.
	InStep bool
	Log    func(format string, args ...any)
}

// OverloadStep is one window of an overload run: the quality the
// listeners admitted before it got while more joined.
type OverloadStep struct {
	// OfferedX is the offered load at the window's start in multiples of
	// the capacity; Offered, Admitted, Refused and Failed count the
	// listeners that had asked to join by then.
	OfferedX float64 `json:"offered_x"`
	Offered  int     `json:"offered"`
	Admitted int     `json:"admitted"`
	Refused  int     `json:"refused"`
	Failed   int     `json:"failed"`
	// Measured listeners (admitted before the window): late counts lost
	// packets too, as the seed's tables do.
	Measured     int     `json:"measured"`
	LatePct      float64 `json:"late_pct"`
	LossPct      float64 `json:"loss_pct"`
	AvgLatencyMs float64 `json:"avg_latency_ms"`
	DeliveredPPS float64 `json:"delivered_pps"`
	// NodeDelayP99Ms is the 99th percentile of the node's own queueing
	// (convene_media_forward_delay_seconds) over the window, as the upper
	// bound of its bucket (negative: past the last bound); 0 when the
	// system does not say. Latency beyond it was spent outside the node:
	// the kernel, the load's process.
	NodeDelayP99Ms float64 `json:"node_delay_p99_ms,omitempty"`
	// NodeReadP99Ms is the same of what the node's reader made datagrams
	// wait in its socket's receive queue
	// (convene_media_receive_delay_seconds).
	NodeReadP99Ms float64 `json:"node_read_p99_ms,omitempty"`
	// NodeOverLate counts the node's sends (flushes) and reads that waited
	// past loadgen.Late in it alone: with none, a late packet was made
	// late outside the node (the kernel, the load's process).
	NodeOverLate float64 `json:"node_over_late"`
	// MachineBusy is the share of the machine's CPUs busy over the window
	// (every process's and the kernel's time).
	MachineBusy float64 `json:"machine_busy"`
	// Where the packets lost over the window were dropped, as far as
	// anyone counted: by the node itself (its queues, its count: -1 when
	// the system does not say), by the kernel at the server's sockets
	// and at the load's (receive buffers full: a process that did not
	// read in time). On one machine the load's drops are the load's
	// limit, not the server's; the window fails for them all the same.
	// NodeLimit is what the node's governor said at the window's end
	// (GET /api/v1/node): what set its capacity ("cpu", "queueing",
	// "machine") and its admission limit, packets/s handled; empty for a
	// system without admission.
	NodeLimit         string  `json:"node_limited_by,omitempty"`
	NodeAdmitPPS      float64 `json:"node_admit_pps,omitempty"`
	DropsServer       int64   `json:"drops_server"`
	DropsServerKernel uint64  `json:"drops_server_kernel"`
	DropsLoadKernel   uint64  `json:"drops_load_kernel"`
	Pass              bool    `json:"pass"` // 0 % late and average under 20 ms
}

// dropper is a system that counts what it dropped and whose sockets'
// kernel drops can be read.
type dropper interface {
	// drops returns its own count of packets dropped (negative: it does
	// not say) and its process's ID.
	drops() (own int64, pid int)
}

// dropsNow reads the drop counters a window's step reports.
type dropsNow struct {
	own                 int64
	srvKernel, ldKernel uint64
}

func readDrops(sys Joiner) dropsNow {
	d := dropsNow{own: -1}
	if dr, ok := sys.(dropper); ok {
		var pid int
		d.own, pid = dr.drops()
		d.srvKernel, _ = proc.UDPDrops(pid)
	}
	d.ldKernel, _ = proc.UDPDrops(os.Getpid())
	return d
}

func (d dropsNow) into(step *OverloadStep, a dropsNow) {
	step.DropsServer = -1
	if d.own >= 0 && a.own >= 0 {
		step.DropsServer = d.own - a.own
	}
	step.DropsServerKernel = d.srvKernel - min(a.srvKernel, d.srvKernel)
	step.DropsLoadKernel = d.ldKernel - min(a.ldKernel, d.ldKernel)
}

// delayer is a system that says how long it queued packets itself.
type delayer interface {
	// ownDelay is its queueing delay histogram: cumulative counts by
	// upper bound in seconds; nil when it cannot be read. readDelay is
	// the same of its reader's wait.
	ownDelay() map[float64]float64
	readDelay() map[float64]float64
	// limit is what its governor says sets its capacity, and its
	// admission limit in packets/s ("" when it cannot be read).
	limit() (string, float64)
}

// OverloadRun is one system in one overload scenario.
type OverloadRun struct {
	System      string         `json:"system"`
	Scenario    string         `json:"scenario"`
	CapacityPPS float64        `json:"capacity_pps"`
	Listeners   int            `json:"listeners"` // offered in all (2 × capacity, and 10 % more during the last window)
	Steps       []OverloadStep `json:"steps"`
	Admitted    int            `json:"admitted"`
	Refused     int            `json:"refused"`
	Failed      int            `json:"failed"`
	// RefusalAvgMs and RefusalMaxMs: how fast the refusals came.
	RefusalAvgMs float64 `json:"refusal_avg_ms"`
	RefusalMaxMs float64 `json:"refusal_max_ms"`
	Error        string  `json:"error,omitempty"`
}

// OverloadReport is an overload run's results.
type OverloadReport struct {
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished"`
	Host        string        `json:"host"`
	Quick       bool          `json:"quick"`
	CapacityPPS float64       `json:"capacity_pps"`
	InStep      bool          `json:"in_step"`
	Runs        []OverloadRun `json:"runs"`
	Notes       []string      `json:"notes"`
}

// RunOverload drives every selected overload scenario on every system.
func RunOverload(ctx context.Context, systems []Joiner, o OverloadOptions) OverloadReport {
	r := OverloadReport{Started: time.Now(), Quick: o.Quick, Host: hostDescription(), CapacityPPS: o.CapacityPPS, InStep: o.InStep}
	for _, sc := range overloadScenarios() {
		if !selected(sc.name, o.Scenarios) {
			continue
		}
		for _, sys := range systems {
			run := runOverload(ctx, sys, sc, o)
			for _, st := range run.Steps {
				o.Log("%-22s %-12s %.2f× offered=%-6d admitted=%-6d refused=%-6d late %.3f %%, loss %.3f %%, avg %.1f ms",
					sc.name, sys.Name(), st.OfferedX, st.Offered, st.Admitted, st.Refused, st.LatePct, st.LossPct, st.AvgLatencyMs)
			}
			if run.Error != "" {
				o.Log("%-22s %-12s ERROR %s", sc.name, sys.Name(), run.Error)
			}
			r.Runs = append(r.Runs, run)
		}
	}
	r.Finished = time.Now()
	return r
}

// filesAllow is how many listeners of sc a system with a connection per
// listener and per speaker can be offered within files open files: two
// sockets each (the connection's two ends are both here), and some to
// spare.
func filesAllow(sc overloadScenario, files int) int {
	need := func(n int) int { return 2*len(sc.plan(n)) + 2*n + 512 }
	n := max(0, (files-512)/2)
	for n > 0 && need(n) > files {
		n -= max(1, (need(n)-files+1)/2)
	}
	for n >= 0 && need(n+1) <= files { // the halving may step a little far
		n++
	}
	return max(n, 0)
}

// overloadDrain is the pause between windows: what is in flight arrives,
// and the listeners' counters stand still while they are read.
const overloadDrain = 400 * time.Millisecond

func runOverload(ctx context.Context, sys Joiner, sc overloadScenario, o OverloadOptions) OverloadRun {
	run := OverloadRun{System: sys.Name(), Scenario: sc.name, CapacityPPS: o.CapacityPPS}
	full := int(math.Ceil(2 * o.CapacityPPS / sc.pps)) // 2 × capacity
	total := full + full/10                            // joins go on during the last window
	if l, ok := sys.(Limited); ok && l.FilePerListener() && o.MaxFiles > 0 {
		total = min(total, filesAllow(sc, o.MaxFiles))
	}
	run.Listeners = total
	fractions := []float64{0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2}
	window := 5 * time.Second
	if o.Quick {
		fractions, window = []float64{0.5, 1, 1.5, 2}, 3*time.Second
	}
	offeredAt := func(x float64) int { return min(total, int(math.Round(x*float64(full)/2))) }

	if s, ok := sys.(interface{ settle(context.Context) error }); ok {
		if err := s.settle(ctx); err != nil {
			run.Error = err.Error()
			return run
		}
	}
	clock := loadgen.NewClock()
	meetings := sc.plan(total)
	st, join, err := sys.PrepareJoins(ctx, meetings, clock)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer st.Close()
	speakers := continuing(st.Speakers)
	if !o.InStep {
		for _, s := range speakers {
			s.Phase = phaseOf(s.Stream.Kind(), s.Meeting)
		}
	}
	j := &joins{join: join, admitted: make([]bool, len(st.Listeners))}

	// Warm-up: the streams' uncounted packets, while the first listeners join.
	warm := loadgen.Warmup * loadgen.AudioInterval
	if sc.plan(1)[0].Kind == loadgen.Video {
		warm = loadgen.Warmup * time.Second / (3 * loadgen.VideoFPS)
	}
	drive(ctx, speakers, clock, warm+time.Second, func() { j.upTo(ctx, offeredAt(fractions[0])) })
	for k, x := range fractions {
		time.Sleep(overloadDrain)
		before := snapshot(st)
		step, admitted := j.step(x)
		step.OfferedX = min(x, float64(step.Offered)*2/float64(full)) // less where the file limit capped a peer
		next := total
		if k+1 < len(fractions) {
			next = offeredAt(fractions[k+1])
		}
		start := time.Now()
		var d0, r0 map[float64]float64
		dl, own := sys.(delayer)
		if own {
			d0, r0 = dl.ownDelay(), dl.readDelay()
		}
		cpu0, cpuErr := proc.ReadCPU()
		drops0 := readDrops(sys)
		drive(ctx, speakers, clock, window, func() { j.upTo(ctx, next) })
		elapsed := time.Since(start)
		if cpu1, err := proc.ReadCPU(); err == nil && cpuErr == nil && cpu1.Total > cpu0.Total {
			step.MachineBusy = float64(cpu1.Busy-cpu0.Busy+cpu1.Steal-cpu0.Steal) / float64(cpu1.Total-cpu0.Total)
		}
		if own && d0 != nil {
			d1 := dl.ownDelay()
			step.NodeDelayP99Ms = convene.HistogramPct(d0, d1, 0.99)
			step.NodeOverLate += convene.HistogramOver(d0, d1, loadgen.Late.Seconds())
		}
		if own && r0 != nil {
			r1 := dl.readDelay()
			step.NodeReadP99Ms = convene.HistogramPct(r0, r1, 0.99)
			step.NodeOverLate += convene.HistogramOver(r0, r1, loadgen.Late.Seconds())
		}
		if own {
			step.NodeLimit, step.NodeAdmitPPS = dl.limit()
		}
		time.Sleep(overloadDrain)
		readDrops(sys).into(&step, drops0)
		measure(&step, admitted, before, snapshot(st), st, elapsed)
		run.Steps = append(run.Steps, step)
		if ctx.Err() != nil {
			break
		}
	}
	run.Admitted, run.Refused, run.Failed = j.counts()
	run.RefusalAvgMs, run.RefusalMaxMs = j.refusalMs()
	return run
}

// joins offers listeners to a system in order, 8 at a time.
type joins struct {
	join func(context.Context, int) error

	mu                     sync.Mutex
	next                   int
	admitted               []bool
	nAdmitted, nRef, nFail int
	refusals               []time.Duration
}

// upTo offers the listeners up to n (exclusive) and returns when each has
// been answered.
func (j *joins) upTo(ctx context.Context, n int) {
	j.mu.Lock()
	from := j.next
	j.next = max(j.next, n)
	j.mu.Unlock()
	var jobs []func() error
	for i := from; i < n; i++ {
		jobs = append(jobs, func() error {
			start := time.Now()
			err := j.join(ctx, i)
			j.mu.Lock()
			defer j.mu.Unlock()
			switch {
			case err == nil:
				j.admitted[i] = true
				j.nAdmitted++
			case errors.Is(err, ErrRefused):
				j.nRef++
				j.refusals = append(j.refusals, time.Since(start))
			default:
				j.nFail++
			}
			return nil
		})
	}
	parallel(ctx, 8, jobs)
}

// step starts a window's record: the joins answered so far, and which
// listeners were admitted.
func (j *joins) step(x float64) (OverloadStep, []bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return OverloadStep{OfferedX: x, Offered: j.nAdmitted + j.nRef + j.nFail, Admitted: j.nAdmitted, Refused: j.nRef,
		Failed: j.nFail}, slices.Clone(j.admitted)
}

func (j *joins) counts() (admitted, refused, failed int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.nAdmitted, j.nRef, j.nFail
}

func (j *joins) refusalMs() (avg, most float64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.refusals) == 0 {
		return 0, 0
	}
	var sum time.Duration
	for _, d := range j.refusals {
		sum += d
	}
	return ms(sum / time.Duration(len(j.refusals))), ms(slices.Max(j.refusals))
}

// tally is what the listeners and speakers had counted at one moment.
type tally struct {
	received, late []uint64
	latency        []time.Duration
	counted        []uint64 // per meeting
}

// snapshot reads the counters between windows, while nothing is sent.
func snapshot(st *Setup) tally {
	t := tally{received: make([]uint64, len(st.Listeners)), late: make([]uint64, len(st.Listeners)),
		latency: make([]time.Duration, len(st.Listeners)), counted: make([]uint64, len(st.Speakers))}
	for i, l := range st.Listeners {
		t.received[i], t.late[i], t.latency[i] = l.Received, l.LateCount, l.LatencySum
	}
	for _, s := range st.Speakers {
		t.counted[s.Meeting] = s.Counted
	}
	return t
}

// measure fills a step's quality from the counters of the listeners
// admitted before the window.
func measure(step *OverloadStep, admitted []bool, a, b tally, st *Setup, d time.Duration) {
	var exp, recv, late, lost uint64
	var lat time.Duration
	n := 0
	for i, l := range st.Listeners {
		if !admitted[i] {
			continue
		}
		want := b.counted[l.Meeting] - a.counted[l.Meeting]
		got := b.received[i] - a.received[i]
		n++
		exp += want
		recv += got
		late += b.late[i] - a.late[i]
		lat += b.latency[i] - a.latency[i]
		if got < want {
			lost += want - got
		}
	}
	step.Measured = n
	if exp > 0 {
		step.LossPct = 100 * float64(lost) / float64(exp)
	}
	// Late of what reached the listeners over the window or never did: a
	// system that fell behind delivers in a window packets sent before it
	// (more than the window's), each of them late.
	if recv+lost > 0 {
		step.LatePct = 100 * float64(late+lost) / float64(recv+lost)
	}
	if recv > 0 {
		step.AvgLatencyMs = ms(lat / time.Duration(recv))
	}
	step.DeliveredPPS = float64(recv) / d.Seconds()
	step.Pass = n > 0 && late+lost == 0 && step.AvgLatencyMs < ms(MaxAvgLatency)
}

// shifted is a speaker's stream whose times start again from zero at each
// window (rebase), so the speakers can be driven window by window without
// a gap in their sequence.
type shifted struct {
	loadgen.Stream
	last, off time.Duration
}

func (s *shifted) Next() loadgen.Item {
	it := s.Stream.Next()
	s.last = it.At
	it.At -= s.off
	return it
}

func (s *shifted) rebase() { s.off = s.last }

// phaseOf is when meeting m's speaker starts within its stream's interval
// (a packet's for audio, a frame's for video): the meetings spread over
// it by the golden ratio, evenly for any number of them.
func phaseOf(k loadgen.Kind, m int) time.Duration {
	interval := loadgen.AudioInterval
	if k == loadgen.Video {
		interval = time.Second / loadgen.VideoFPS
	}
	_, frac := math.Modf(float64(m) * (math.Sqrt(5) - 1) / 2)
	return time.Duration(frac * float64(interval))
}

func continuing(sp []*loadgen.Speaker) []*loadgen.Speaker {
	for _, s := range sp {
		s.Stream = &shifted{Stream: s.Stream}
	}
	return sp
}

// drive sends for at least d and until joins has returned, in one-second
// pieces.
func drive(ctx context.Context, sp []*loadgen.Speaker, clock *loadgen.Clock, d time.Duration, joins func()) {
	done := make(chan struct{})
	go func() { defer close(done); joins() }()
	start := time.Now()
	for ctx.Err() == nil {
		for _, s := range sp {
			s.Stream.(*shifted).rebase()
		}
		loadgen.RunSpeakers(ctx, clock, sp, time.Second)
		if time.Since(start) < d {
			continue
		}
		select {
		case <-done:
			return
		default:
		}
	}
	<-done
}
