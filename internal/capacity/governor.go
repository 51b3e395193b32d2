package capacity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Typical packet rates of one track, for predicting what a member adds
// before its tracks have been measured.
const (
	AudioPPS = 50  // 20 ms frames
	VideoPPS = 200 // ~30 frames/s of a few packets each
)

// Shedding thresholds, as fractions of the capacity: the level steps up
// while the load is above shedAbove and may step down after calmFor
// observations in a row below restoreBelow.
const (
	shedAbove    = 0.95
	restoreBelow = 0.75
	// calmFor is the observations below restoreBelow a step down needs at
	// first; it doubles each time the level has to go up again soon after
	// going down (up to maxCalm), so the node does not flap.
	calmFor = 4
	maxCalm = 128
	// settle is the observations a step up waits for the step before to
	// show in the load.
	settle = 2
)

// RetryAfter is what a refusal tells the client to wait.
const RetryAfter = 5 * time.Second

// ErrOverCapacity is what every refusal is (errors.Is).
var ErrOverCapacity = errors.New("node over capacity")

// Refusal is a refused admission and its reason.
type Refusal struct {
	What string // join, whip, whep, link, mixer
	// LoadPPS is the load the refusal went by (the measured one, or what
	// was admitted if more), AddPPS the predicted packets of the refused
	// one, LimitPPS what the node admits up to, CapacityPPS its capacity.
	LoadPPS, AddPPS, LimitPPS, CapacityPPS float64
	Level                                  Level
	RetryAfter                             time.Duration
	// Paced is a refusal of a node with room that took on as much as it
	// takes between two samples (a flash crowd): try again in a second.
	// PacePPS is that much.
	Paced   bool
	PacePPS float64
	// MachineBusy, when set, is the share of the machine's CPUs busy that
	// refused it (every process's work, at least machineFull), the node
	// otherwise having room.
	MachineBusy float64
	// Alternatives are other nodes of the cluster with room for it, most
	// room first (Options.Alternatives); none on a lone node.
	Alternatives []Alternative
}

// Alternative is another node a refusal names: one that is up and, by its
// last heartbeat, would admit what this node refused. Its addresses are
// those it publishes for clients.
type Alternative struct {
	Node string `json:"node"`
	// URL is the base URL of its API and web app; SIP the host:port of
	// its SIP server (empty: none).
	URL string `json:"url,omitempty"`
	SIP string `json:"sip,omitempty"`
	// RoomPPS is the packets/s it would still admit.
	RoomPPS float64 `json:"room_pps"`
	// TokenValid says whether it accepts the tokens this node signs (it
	// signs with the same key): a member may take its token there.
	TokenValid bool `json:"token_valid"`
}

func (r *Refusal) Error() string {
	try := "try again later or another node"
	if len(r.Alternatives) > 0 {
		names := make([]string, len(r.Alternatives))
		for i, a := range r.Alternatives {
			names[i] = a.Node
		}
		try = "try again later or a node with room: " + strings.Join(names, ", ")
	}
	if r.Paced {
		return fmt.Sprintf("node busy taking on members: this %s would add %.0f packets/s past the %.0f it takes on in half a second; try again in a second",
			r.What, r.AddPPS, r.PacePPS)
	}
	if r.MachineBusy > 0 {
		return fmt.Sprintf("node busy: its machine's CPUs are %.0f %% busy (its own and other work), and a node takes on nothing more past %.0f %%; %s",
			r.MachineBusy*100, machineFull*100, try)
	}
	if r.Level != Normal {
		return fmt.Sprintf("node over capacity: it is shedding video (%s) at %.0f packets/s of its %.0f; %s",
			r.Level, r.LoadPPS, r.CapacityPPS, try)
	}
	return fmt.Sprintf("node over capacity: this %s would add %.0f packets/s to %.0f, past the %.0f it admits (capacity %.0f less headroom); %s",
		r.What, r.AddPPS, r.LoadPPS, r.LimitPPS, r.CapacityPPS, try)
}

// Is makes every Refusal ErrOverCapacity.
func (r *Refusal) Is(target error) bool { return target == ErrOverCapacity }

// Options configure a Governor.
type Options struct {
	// PPS fixes the capacity in packets/s sent; 0 measures it.
	PPS float64
	// Headroom is the fraction of the capacity kept free of admissions.
	Headroom float64
	// ProbePPS is the start-up self-probe's capacity, where a measured
	// capacity starts; 0 with PPS 0 admits everything until the running
	// cost has been measured.
	ProbePPS float64
	// Cores is the CPU the node may use; 0 means GOMAXPROCS.
	Cores float64
	// Sent counts the packets the node has sent, CPU its process CPU
	// seconds; both only grow. Either nil: Sample measures nothing.
	Sent func() uint64
	CPU  func() float64
	// Received, if set, counts the packets the node has taken from its
	// endpoints. A packet taken costs the node about what one sent does
	// (a system call's share, a copy, the fan-out's enqueueing), so both
	// count in the load, the cost per packet and the capacity: without
	// it, the CPU of 80,000 speakers' packets a second was charged to the
	// few thousand sent to the first listeners (39 µs a packet), and the
	// node admitted 238 video listeners where it carries 2,500. Sample
	// reads it right after Sent.
	Received func() uint64
	// Machine, if set, counts the CPU seconds the whole machine has been
	// busy (every process's, the kernel's, and what the hypervisor stole):
	// what others take of Cores is not the node's to use. A noisy
	// neighbour (or a load generator on the same machine) then lowers
	// the capacity, so the node admits less and sheds, instead of
	// admitting by CPU it will not get. Nil: the node has Cores to itself.
	Machine func() float64
	// Delay, if set, is the node's own queueing delay in seconds: the 99th
	// percentile of what its media waited in its queues since the last
	// call (the writers', and the socket's receive queue for the reader;
	// a datagram the kernel dropped there counts as a long wait);
	// negative when nothing was sent. In measured mode a node
	// whose queues hold packets longer than DelayBar is at its capacity
	// whatever its CPU says (the machine's CPUs are all taken, the
	// kernel's send path is the limit): the capacity is held below the
	// load it carried then, and probed up again while the queues stay
	// short.
	Delay func() float64
	// Predicted, if set, is the packets/s the node's members are
	// predicted to be sent (session.Service.Predicted), read at each
	// sample.
	Predicted func() float64
	// Alternatives, if set, names the nodes with room for a refused
	// request of pps packets/s (cluster mode); called without the
	// Governor's lock held, on the refused caller's goroutine.
	Alternatives func(pps float64) []Alternative
	// OnShed hears each step of the shed level; it is called without the
	// Governor's lock held, on the goroutine that observed the load.
	OnShed func(Change)
	Now    func() time.Time
	Logger *slog.Logger
}

// Governor measures the node's capacity and load, admits, and sheds.
type Governor struct {
	o     Options
	level atomic.Int32 // read by the media paths

	mu       sync.Mutex
	capacity float64 // packets/s
	cost     float64 // CPU seconds per packet sent (measured mode)
	// cpuCap is the capacity the CPU allows (or the probe's, or the
	// configured one); ceiling what the queueing delay allows (0: none);
	// capacity is the lower. delay is the last sample's.
	cpuCap, ceiling, delay float64
	quiet                  int // samples in a row at most delayCalm
	over                   int // samples in a row past DelayBar
	// machineShare is the share of the machine's CPUs (Cores) busy over
	// the last sample (Options.Machine), -1 when unknown.
	machineShare float64
	load         float64 // packets/s, smoothed
	sampled      bool
	lastSent     uint64
	lastRecv     uint64
	recvRate     float64 // packets/s taken from endpoints, smoothed
	lastCPU      float64
	lastAt       time.Time
	// lastMachine is Options.Machine at the last sample; avail the cores
	// left to the node (Cores less what others took), smoothed.
	lastMachine float64
	avail       float64
	// predicted is Options.Predicted at the last sample, admitted what
	// was admitted since: together what the node has taken on, which
	// counts before the load shows it (members joined, media not flowing
	// yet).
	predicted, admitted float64
	// Hysteresis: observations since the last step, below restoreBelow in
	// a row, needed for a step down.
	sinceStep, calm, need int
	lastDown              bool
	refused               map[string]uint64
}

// New returns a Governor; call Run (or Sample) to measure.
func New(o Options) *Governor {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Cores <= 0 {
		o.Cores = float64(runtime.GOMAXPROCS(0))
	}
	g := &Governor{o: o, need: calmFor, refused: map[string]uint64{}, avail: o.Cores, delay: -1, machineShare: -1}
	switch {
	case o.PPS > 0:
		g.capacity = o.PPS
	case o.ProbePPS > 0:
		g.capacity = o.ProbePPS
		g.cost = o.Cores / o.ProbePPS
	}
	g.cpuCap = g.capacity
	return g
}

// Level is the shed level now; cheap enough for every packet.
func (g *Governor) Level() Level {
	if g == nil {
		return Normal
	}
	return Level(g.level.Load())
}

// Run samples every interval until ctx ends.
func (g *Governor) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			g.Sample()
		}
	}
}

// minBusy is the CPU (in cores) the node must spend over a sample before
// its cost per packet is measured from it: an idle node's fixed costs
// (timers, GC, the API) spread over a few packets would make delivery look
// dear.
const minBusy = 0.2

// minAvail is the least share of Cores the node counts on, however busy
// the others keep the machine: what the scheduler gives it anyway.
const minAvail = 0.1

// minShare is the share of the capacity the load must be before the
// running cost corrects it: below it, the process's other work (the API,
// mixing, SIP, GC) would be charged to a few packets.
const minShare = 0.25

// Queueing delay (Options.Delay), on a busy node: past DelayBar the
// capacity is held where the load stands, so that nothing more is admitted
// (and nothing is shed for it: shedding follows the load against the CPU's
// figure, as before); after quietFor samples in a row at most delayCalm,
// it rises by ceilingRise a sample until the CPU's figure is the lower
// again. Busy is a load of at least minShare of the CPU's figure, a
// machine at least machineFull busy, or a second such sample in a row: a
// single long wait on a node that is neither loaded nor on a busy machine
// is a pause (a GC's, the scheduler's). The CPU's figure alone would not
// do: it is the node's own CPU per packet, and on a machine whose other
// work (or the kernel's share of the sends) takes the rest, it can stand
// several times above what the node gets through.
const (
	DelayBar    = 0.02
	delayCalm   = 0.005
	ceilingRise = 1.03
	// quietFor is the samples in a row at most delayCalm before the held
	// capacity rises: one quiet half-second is not a quiet node.
	quietFor = 4
	// machineFull is the share of the machine's CPUs busy past which a
	// long wait is the machine's limit, whatever the node's load; and
	// past which a node carrying at least minHeld takes on nothing more
	// (Admit; nothing is shed for it): its media share the CPUs with every
	// other process, and on a machine that busy a burst (a round of
	// keyframes, members joining) finds no CPU free and waits. The
	// overload benchmark's multi-video windows failed at 84-86 % busy and
	// passed at 80 %, the node's own queues short on average in both.
	machineFull = 0.8
	// While the queueing signal is on (Options.Delay), what is taken on
	// between two samples is at most rampGrowth of what the node carries
	// (the load, or what its members are predicted to be sent) —
	// rampWarm once the last sample's queues were past delayWarm, near
	// the limit — and at least rampFloor of the capacity: a flash crowd
	// comes in over a few seconds, each step small enough that the signal
	// answers before the next, however far the capacity figure stands
	// above the truth.
	rampGrowth = 0.25
	rampWarm   = 0.02
	delayWarm  = 0.005
	// minPace (packets/s) is the least a sample takes on while queues
	// form: a few browsers joining a small meeting together on a busy
	// laptop are not turned away for it.
	minPace   = 1000
	rampFloor = 0.02
	// holdAbove is where the held capacity puts the load: under
	// shedAbove, over the admission limit (1 − headroom).
	holdAbove = 0.9
	// minHeld (packets/s) is the least load the queueing signal holds the
	// capacity at, and the least it lets a sample take on: a node carrying
	// a few meetings on a busy laptop waits for the machine, not for its
	// own work, and refusing the next member would help no one.
	minHeld = 5000
)

// Sample reads the counters: the load, and in measured mode the cost per
// packet and so the capacity; then observes the load.
func (g *Governor) Sample() {
	if g.o.Sent == nil || g.o.CPU == nil {
		return
	}
	delay := -1.0
	if g.o.Delay != nil {
		delay = g.o.Delay()
	}
	// The counters are read before mu is taken: the session service calls
	// Admit with its own lock held (lock order: session, then Governor).
	now, sent, cpu := g.o.Now(), g.o.Sent(), g.o.CPU()
	var recv uint64
	if g.o.Received != nil {
		recv = g.o.Received()
	}
	machine := -1.0
	if g.o.Machine != nil {
		machine = g.o.Machine()
	}
	predicted := -1.0
	if g.o.Predicted != nil {
		predicted = g.o.Predicted()
	}
	g.mu.Lock()
	if predicted >= 0 {
		// What the members are predicted to be sent, and what their
		// senders send the node (its rate at the last sample).
		g.predicted, g.admitted = predicted+g.recvRate, 0
	}
	if !g.sampled {
		g.sampled, g.lastSent, g.lastRecv, g.lastCPU, g.lastAt, g.lastMachine = true, sent, recv, cpu, now, machine
		g.mu.Unlock()
		return
	}
	dt := now.Sub(g.lastAt).Seconds()
	if dt <= 0 {
		g.mu.Unlock()
		return
	}
	// dp: the packets handled, sent and taken (Options.Received).
	dr := float64(recv - g.lastRecv)
	dp, dc := float64(sent-g.lastSent)+dr, cpu-g.lastCPU
	g.recvRate += (dr/dt - g.recvRate) / 2
	g.machineShare = -1
	if machine >= 0 && g.lastMachine >= 0 {
		g.machineShare = (machine - g.lastMachine) / dt / g.o.Cores
		others := max(0, machine-g.lastMachine-dc) / dt
		g.avail += (max(minAvail*g.o.Cores, g.o.Cores-others) - g.avail) / 2
	}
	g.lastSent, g.lastRecv, g.lastCPU, g.lastAt, g.lastMachine = sent, recv, cpu, now, machine
	if g.o.PPS == 0 && dc/dt >= minBusy && dp > 0 && (g.capacity == 0 || dp/dt >= minShare*g.capacity) {
		c := dc / dp
		if g.cost == 0 {
			g.cost = c
		} else {
			g.cost += (c - g.cost) / 5
		}
	}
	if g.o.PPS == 0 && g.cost > 0 {
		g.cpuCap = g.avail / g.cost
	}
	g.capacity = g.cpuCap
	if g.o.PPS == 0 {
		g.limitByDelay(delay, dp/dt)
	}
	g.mu.Unlock()
	g.Observe(dp / dt)
}

// limitByDelay moves the ceiling by the queueing delay of a sample that
// carried pps, and holds the capacity under it (mu held).
func (g *Governor) limitByDelay(delay, pps float64) {
	g.delay = delay
	busy := pps > 0 && (pps >= minShare*g.cpuCap || g.machineShare >= machineFull || g.over > 0)
	if delay > DelayBar {
		g.over++
	} else {
		g.over = 0
	}
	if delay > delayCalm {
		g.quiet = 0
	}
	switch {
	case busy && delay > DelayBar:
		// Where the load stands now (smoothed with this sample, as Observe
		// will), and never higher while the queues stay long: video's
		// packet rate swings from one half-second to the next, and a hold
		// that followed each swing up let a tenth more in each time. A
		// load that rises past it anyway (members admitted before, their
		// media starting) sheds what can be shed.
		now := pps
		if g.load > 0 {
			now = g.load + (pps-g.load)/2
		}
		c := max(now, minHeld) / holdAbove
		if g.ceiling > 0 {
			c = min(c, g.ceiling)
		}
		// Never under what the members admitted are predicted to be
		// sent (and their senders send): the stall that made the queues
		// long also sent less over the sample that measured it, and a
		// hold set from that dip stood under the load the node carried
		// once it caught up (single-audio: 96,763 held against 156,405
		// carried) and set off shedding, which pauses browsers' video.
		c = max(c, g.predicted/holdAbove)
		if g.ceiling == 0 {
			g.o.Logger.Warn("the node's queues hold packets: capacity held at what it carries", "delay_ms", math.Round(delay*1e3),
				"load_pps", math.Round(pps), "capacity_pps", math.Round(c))
		}
		g.ceiling = c
	case g.ceiling > 0 && delay <= delayCalm:
		if g.quiet++; g.quiet < quietFor {
			break
		}
		// Quiet queues carry the load they carry: a hold set low (a
		// moment's stall while the load was small) starts again from it.
		g.ceiling = max(g.ceiling, g.load/holdAbove) * ceilingRise
		if g.cpuCap > 0 && g.ceiling >= g.cpuCap {
			g.ceiling = 0
		}
	}
	if g.ceiling > 0 && (g.cpuCap == 0 || g.ceiling < g.cpuCap) {
		g.capacity = g.ceiling
	}
}

// Observe takes a load in packets/s (a sample, or an injected signal in
// tests), smooths it, and steps the shed level by at most one.
func (g *Governor) Observe(pps float64) {
	g.mu.Lock()
	if g.load == 0 {
		g.load = pps
	} else {
		g.load += (pps - g.load) / 2
	}
	ch, stepped := g.step()
	g.mu.Unlock()
	if stepped {
		g.o.Logger.Warn("load shedding", "from", ch.From.String(), "to", ch.To.String(),
			"load_pps", math.Round(ch.LoadPPS), "capacity_pps", math.Round(ch.CapacityPPS))
		if g.o.OnShed != nil {
			g.o.OnShed(ch)
		}
	}
}

// step moves the level by the smoothed load; mu is held.
func (g *Governor) step() (Change, bool) {
	g.sinceStep++
	cur := Level(g.level.Load())
	if g.capacity <= 0 {
		return Change{}, false
	}
	ch := Change{From: cur, LoadPPS: g.load, CapacityPPS: g.capacity}
	u := g.load / g.capacity
	switch {
	case u > shedAbove:
		g.calm = 0
		if cur == NoVideo || (cur != Normal && g.sinceStep < settle) {
			return Change{}, false
		}
		if g.lastDown && g.sinceStep < 2*g.need {
			g.need = min(2*g.need, maxCalm) // it went down too soon
		}
		ch.To = cur + 1
		g.lastDown = false
	case u < restoreBelow && cur != Normal:
		g.calm++
		if g.calm < g.need {
			return Change{}, false
		}
		ch.To = cur - 1
		g.calm = 0
		g.lastDown = true
	default:
		g.calm = 0
		if cur == Normal && g.sinceStep > 4*maxCalm {
			g.need = calmFor // long calm: forget the flapping
		}
		return Change{}, false
	}
	g.level.Store(int32(ch.To))
	g.sinceStep = 0
	return ch, true
}

// Admit decides whether the node takes on what (a join, a link, a mixer)
// that is predicted to add pps packets/s sent: whether the load — the
// measured one, or what the node has taken on if that is more — plus pps
// stays within capacity × (1 − headroom), and the node is not shedding.
// Refused, the error is a *Refusal. Members already admitted are never
// affected.
func (g *Governor) Admit(what string, pps float64) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	limit := g.capacity * (1 - g.o.Headroom)
	lvl := Level(g.level.Load())
	// Paced: with the queueing signal on, what is taken on between two
	// samples is bounded (rampGrowth, rampFloor; Predicted sums it anew at
	// each), so that the signal can answer before a flash crowd is all in.
	pace := max(rampGrowth*max(g.load, g.predicted), rampFloor*g.capacity, minHeld)
	if g.delay > delayWarm {
		pace = max(rampWarm*max(g.load, g.predicted), minPace)
	}
	paced := g.o.Delay != nil && g.o.Predicted != nil && g.o.PPS == 0 && g.admitted > 0 && g.admitted+pps > pace
	full := g.machineFull()
	if base := max(g.load, g.predicted+g.admitted); g.capacity > 0 && (lvl != Normal || base+pps > limit || paced || full) {
		g.refused[what]++
		r := &Refusal{What: what, LoadPPS: base, AddPPS: pps, LimitPPS: limit, CapacityPPS: g.capacity,
			Level: lvl, RetryAfter: RetryAfter, Paced: paced && !full && lvl == Normal && base+pps <= limit, PacePPS: pace}
		if full && lvl == Normal && base+pps <= limit {
			r.MachineBusy = g.machineShare
		}
		if r.Paced {
			r.RetryAfter = time.Second
		}
		g.mu.Unlock()
		if g.o.Alternatives != nil {
			r.Alternatives = g.o.Alternatives(pps)
		}
		return r
	}
	g.admitted += pps
	g.mu.Unlock()
	return nil
}

// machineFull says whether the last sample found the machine at least
// machineFull busy while the node carried at least minHeld (measured
// mode): the node then admits nothing more (mu held).
func (g *Governor) machineFull() bool {
	return g.o.PPS == 0 && g.machineShare >= machineFull && g.load >= minHeld
}

// Status is the Governor's state for the API and heartbeats.
type Status struct {
	// CapacityPPS is the capacity in packets/s handled: sent, and taken
	// from endpoints where Options.Received is set; Measured says
	// whether it was measured (else configured).
	CapacityPPS float64 `json:"capacity_pps"`
	Measured    bool    `json:"measured"`
	// CostNS is the measured CPU time per packet handled, in ns (0 when
	// configured or not measured yet).
	CostNS float64 `json:"cost_ns,omitempty"`
	// Cores is the CPU the node may use; AvailableCores what is left of
	// it to the node, others' use taken away (Options.Machine).
	Cores          float64 `json:"cores"`
	AvailableCores float64 `json:"available_cores"`
	// LoadPPS is the packets/s handled now, CommittedPPS those predicted
	// of what is admitted (its members' tracks at their measured rates,
	// what their senders send it, and what was admitted since they were
	// last summed), AdmitPPS the load up to which the node admits
	// (capacity × (1 − headroom)).
	LoadPPS      float64 `json:"load_pps"`
	CommittedPPS float64 `json:"committed_pps"`
	AdmitPPS     float64 `json:"admit_pps"`
	Headroom     float64 `json:"headroom"`
	// QueueDelayMs is the last sample's queueing delay (Options.Delay,
	// its 99th percentile; negative: nothing sent); LimitedBy says what
	// sets the capacity: "cpu", "queueing" (the delay's ceiling, below
	// the CPU's figure), "machine" (the machine's CPUs at least 80 % busy:
	// nothing more is admitted) or "configured".
	QueueDelayMs float64 `json:"queue_delay_ms"`
	LimitedBy    string  `json:"limited_by"`
	// Shed is the shed level's name; ShedLevel its number (0 normal).
	Shed      string `json:"shed"`
	ShedLevel int    `json:"shed_level"`
	// Refused counts refused admissions by what was refused.
	Refused map[string]uint64 `json:"refused"`
}

// Status returns the figures now.
func (g *Governor) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	lvl := Level(g.level.Load())
	st := Status{CapacityPPS: g.capacity, Measured: g.o.PPS == 0, LoadPPS: g.load, CommittedPPS: g.predicted + g.admitted,
		AdmitPPS: g.capacity * (1 - g.o.Headroom), Headroom: g.o.Headroom, Shed: lvl.String(), ShedLevel: int(lvl),
		Cores: g.o.Cores, AvailableCores: g.avail, QueueDelayMs: g.delay * 1e3, LimitedBy: "cpu",
		Refused: make(map[string]uint64, len(g.refused))}
	switch {
	case g.o.PPS > 0:
		st.LimitedBy = "configured"
	case g.ceiling > 0 && g.ceiling < g.cpuCap:
		st.LimitedBy = "queueing"
	case g.machineFull():
		st.LimitedBy = "machine"
	}
	if g.machineFull() {
		// It admits nothing more: what it admits up to is what it has
		// (so other nodes' refusals do not name it, registry.Node.Room).
		st.AdmitPPS = min(st.AdmitPPS, max(st.LoadPPS, st.CommittedPPS))
	}
	if g.o.PPS == 0 && g.cost > 0 {
		st.CostNS = g.cost * 1e9
	}
	for k, v := range g.refused {
		st.Refused[k] = v
	}
	return st
}
