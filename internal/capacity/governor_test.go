package capacity

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// clock is a hand-moved clock: tests never wait.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAdmitRefusesPastCapacityLessHeadroom(t *testing.T) {
	g := New(Options{PPS: 1000, Headroom: 0.2})
	g.Observe(500)
	if err := g.Admit("join", 250); err != nil {
		t.Fatalf("500 + 250 of 800: %v", err)
	}
	// The load or what the node has taken on, whichever is more (500
	// measured, 250 admitted), plus 350 is past 800.
	err := g.Admit("link", 350)
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrOverCapacity) {
		t.Fatalf("500 + 350 of 800: got %v, want a refusal", err)
	}
	if r.What != "link" || r.AddPPS != 350 || r.LimitPPS != 800 || r.LoadPPS != 500 || r.RetryAfter <= 0 {
		t.Errorf("refusal %+v", r)
	}
	if !strings.Contains(err.Error(), "would add 350 packets/s to 500") {
		t.Errorf("reason %q does not say what it would add", err)
	}
	if st := g.Status(); st.Refused["link"] != 1 || st.CapacityPPS != 1000 || st.AdmitPPS != 800 || st.Measured {
		t.Errorf("status %+v", st)
	}
}

// TestRefusalNamesAlternatives: a refusal carries the nodes
// Options.Alternatives names for its packets/s, and says them; an
// admission never asks.
func TestRefusalNamesAlternatives(t *testing.T) {
	var asked []float64
	g := New(Options{PPS: 100, Alternatives: func(pps float64) []Alternative {
		asked = append(asked, pps)
		return []Alternative{{Node: "b", URL: "https://b.example", RoomPPS: 900}, {Node: "c", RoomPPS: 60}}
	}})
	if err := g.Admit("join", 50); err != nil {
		t.Fatal(err)
	}
	err := g.Admit("join", 60)
	var r *Refusal
	if !errors.As(err, &r) || len(r.Alternatives) != 2 || r.Alternatives[0].Node != "b" {
		t.Fatalf("refusal %v: want b and c named", err)
	}
	if !slices.Equal(asked, []float64{60}) {
		t.Errorf("asked for alternatives with %v, want only the refused 60 packets/s", asked)
	}
	if !strings.Contains(err.Error(), "a node with room: b, c") {
		t.Errorf("reason %q does not name them", err)
	}
	if g.Status().CommittedPPS != 50 {
		t.Errorf("committed %v after a refusal, want the admitted 50", g.Status().CommittedPPS)
	}
}

// TestAdmitCountsWhatIsTakenOn: members joined before their media flows
// count, as admitted and then as the session predicts them; when they
// leave, the prediction falls and there is room again.
func TestAdmitCountsWhatIsTakenOn(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	predicted := 0.0
	g := New(Options{PPS: 1000, Headroom: 0.2, Now: c.now, Sent: func() uint64 { return 0 }, CPU: func() float64 { return 0 },
		Predicted: func() float64 { return predicted }})
	for i := range 3 {
		if err := g.Admit("join", 250); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	if err := g.Admit("join", 250); err == nil {
		t.Fatal("a fourth join of 250 past 800 admitted")
	}
	// A sample: the session's prediction replaces what was admitted.
	predicted = 750
	c.t = c.t.Add(time.Second)
	g.Sample()
	if err := g.Admit("join", 250); err == nil {
		t.Fatal("admitted past 800 after the sample")
	}
	predicted = 500 // one left
	c.t = c.t.Add(time.Second)
	g.Sample()
	if st := g.Status(); st.CommittedPPS != 500 || st.LoadPPS != 0 {
		t.Errorf("status %+v", st)
	}
	if err := g.Admit("join", 250); err != nil {
		t.Errorf("after a member left: %v", err)
	}
}

func TestSheddingOrderAndRecovery(t *testing.T) {
	var got []Level
	g := New(Options{PPS: 1000, Headroom: 0.2, OnShed: func(c Change) { got = append(got, c.To) }})
	// An injected load signal: twice the capacity, whatever is shed.
	for range 20 {
		g.Observe(2000)
	}
	if want := []Level{LowestLayer, SpeakersVideo, NoVideo}; !slices.Equal(got, want) {
		t.Fatalf("steps under overload %v, want %v", got, want)
	}
	if err := g.Admit("whep", 0); !errors.Is(err, ErrOverCapacity) {
		t.Errorf("a join while shedding: %v, want refused", err)
	}
	// Between the thresholds: the level holds.
	for range 50 {
		g.Observe(850)
	}
	if g.Level() != NoVideo {
		t.Fatalf("level %v at 85%%, want it held at %v", g.Level(), NoVideo)
	}
	// The load falls: one step at a time, back to normal.
	got = nil
	for range 100 {
		g.Observe(100)
	}
	if want := []Level{SpeakersVideo, LowestLayer, Normal}; !slices.Equal(got, want) {
		t.Fatalf("steps as the load falls %v, want %v", got, want)
	}
	if err := g.Admit("join", 50); err != nil {
		t.Errorf("after recovery: %v", err)
	}
}

func TestSheddingBacksOffWhenItFlaps(t *testing.T) {
	g := New(Options{PPS: 1000})
	observeUntil := func(pps float64, want Level) int {
		for n := 1; n <= 1000; n++ {
			g.Observe(pps)
			if g.Level() == want {
				return n
			}
		}
		t.Fatalf("level never reached %v at %v pps", want, pps)
		return 0
	}
	observeUntil(3000, LowestLayer)
	first := observeUntil(1, Normal) // the EWMA falls, then the calm count
	observeUntil(3000, LowestLayer)  // up again at once: it went down too soon
	second := observeUntil(1, Normal)
	if second <= first {
		t.Errorf("second recovery took %d observations, the first %d: want longer after a flap", second, first)
	}
}

func TestMeasuredCapacityFromRunningCost(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu float64
	g := New(Options{Cores: 2, ProbePPS: 100_000, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu }})
	if st := g.Status(); st.CapacityPPS != 100_000 || !st.Measured {
		t.Fatalf("from the probe: %+v", st)
	}
	g.Sample()
	// 10 µs of CPU per packet: 2 cores deliver 200,000/s.
	for range 40 {
		c.t = c.t.Add(time.Second)
		sent += 50_000
		cpu += 0.5
		g.Sample()
	}
	st := g.Status()
	if st.CapacityPPS < 190_000 || st.CapacityPPS > 210_000 {
		t.Errorf("capacity %.0f, want ~200000 (cost %.0f ns)", st.CapacityPPS, st.CostNS)
	}
	if st.LoadPPS < 49_000 || st.LoadPPS > 51_000 {
		t.Errorf("load %.0f, want ~50000", st.LoadPPS)
	}
	// An idle node's fixed costs do not make packets look dear.
	for range 40 {
		c.t = c.t.Add(time.Second)
		sent += 10
		cpu += 0.05
		g.Sample()
	}
	if st2 := g.Status(); st2.CapacityPPS != st.CapacityPPS {
		t.Errorf("capacity moved from %.0f to %.0f while idle", st.CapacityPPS, st2.CapacityPPS)
	}
}

// What other processes take of the machine is not the node's: a noisy
// neighbour lowers the capacity (and so what is admitted, and sheds), and
// it comes back when the neighbour goes.
func TestNoisyNeighbourLowersCapacity(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu, machine, neighbour float64
	g := New(Options{Cores: 2, ProbePPS: 200_000, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu }, Machine: func() float64 { return machine }})
	g.Sample()
	run := func(seconds int) Status {
		for range seconds {
			c.t = c.t.Add(time.Second)
			sent += 50_000 // 10 µs each: half a core
			cpu += 0.5
			machine += 0.5 + neighbour
			g.Sample()
		}
		return g.Status()
	}
	if st := run(20); st.CapacityPPS < 190_000 || st.AvailableCores < 1.95 {
		t.Fatalf("alone: capacity %.0f, %.2f cores", st.CapacityPPS, st.AvailableCores)
	}
	neighbour = 1.2 // a load generator takes 1.2 of the 2 cores
	st := run(20)
	if st.AvailableCores < 0.75 || st.AvailableCores > 0.85 || st.CapacityPPS < 75_000 || st.CapacityPPS > 85_000 {
		t.Fatalf("beside a neighbour of 1.2 cores: %.2f cores, capacity %.0f; want 0.8 and 80000", st.AvailableCores, st.CapacityPPS)
	}
	if err := g.Admit("link", 40_000); err == nil {
		t.Error("admitted 40000 more packets/s beside the neighbour")
	}
	neighbour = 2 // it takes everything: the node still counts on a tenth
	if st := run(20); st.AvailableCores < 0.19 || st.AvailableCores > 0.21 {
		t.Errorf("machine full: %.2f cores", st.AvailableCores)
	}
	neighbour = 0
	if st := run(20); st.CapacityPPS < 190_000 {
		t.Errorf("after the neighbour left: capacity %.0f", st.CapacityPPS)
	}
}

// TestQueueingDelayHoldsCapacity: a node whose CPU figure says 200,000
// packets/s but whose queues hold packets past DelayBar at 50,000 is at
// its capacity: it is held where its load stands (admissions refused,
// named as limited by queueing, nothing shed), stays there while the
// queues stay long, and rises back to the CPU's figure once they are
// short. A long wait at a light load is a pause, and a configured
// capacity is the operator's: neither moves it.
func TestQueueingDelayHoldsCapacity(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu, delay float64
	g := New(Options{Cores: 2, ProbePPS: 200_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu }, Delay: func() float64 { return delay }})
	g.Sample()
	run := func(samples int) Status {
		for range samples {
			c.t = c.t.Add(time.Second)
			sent += 50_000 // 10 µs each: half a core
			cpu += 0.5
			g.Sample()
		}
		return g.Status()
	}
	delay = 0.001
	if st := run(10); st.CapacityPPS < 190_000 || st.LimitedBy != "cpu" {
		t.Fatalf("short queues: capacity %.0f limited by %s", st.CapacityPPS, st.LimitedBy)
	}
	// A long wait at a light load (1,000 packets/s) is a pause.
	delay = 0.3
	c.t = c.t.Add(time.Second)
	sent += 1000
	cpu += 0.01
	g.Sample()
	if st := g.Status(); st.CapacityPPS < 190_000 {
		t.Fatalf("a pause at 1000 packets/s: capacity %.0f", st.CapacityPPS)
	}
	delay = 0.001
	run(5)

	delay = 0.2
	st := run(5)
	if st.CapacityPPS < 50_000 || st.CapacityPPS > 60_000 || st.LimitedBy != "queueing" || st.QueueDelayMs != 200 || st.ShedLevel != 0 {
		t.Fatalf("queues of 200 ms at 50000 packets/s: capacity %.0f limited by %s, delay %v ms, shed %s",
			st.CapacityPPS, st.LimitedBy, st.QueueDelayMs, st.Shed)
	}
	if err := g.Admit("join", 100); err == nil {
		t.Error("admitted a join while the queues hold packets")
	}
	delay = 0.007 // neither long nor short: held
	held := run(1).CapacityPPS
	if st := run(5); st.CapacityPPS != held {
		t.Errorf("queues of 7 ms: capacity %.0f, then %.0f", held, st.CapacityPPS)
	}
	delay = 0.001
	if st := run(400); st.CapacityPPS < 190_000 || st.LimitedBy != "cpu" || st.ShedLevel != 0 {
		t.Errorf("short queues again: capacity %.0f limited by %s, shed %s", st.CapacityPPS, st.LimitedBy, st.Shed)
	}

	fixed := New(Options{PPS: 100_000, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu }, Delay: func() float64 { return 0.5 }})
	fixed.Sample()
	c.t = c.t.Add(time.Second)
	sent += 50_000
	fixed.Sample()
	if st := fixed.Status(); st.CapacityPPS != 100_000 || st.LimitedBy != "configured" {
		t.Errorf("configured: capacity %.0f limited by %s", st.CapacityPPS, st.LimitedBy)
	}
}

// TestAdmissionPaced: with the queueing signal on, a node takes on between
// two samples at most a quarter of what it carries, and at least a fiftieth
// of its capacity (a fiftieth of what it carries once its queues pass
// 5 ms; never less than minPace); past it a join is refused as paced
// (retry in a second), and the next sample lets more in.
func TestAdmissionPaced(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu, predicted float64
	delay := 0.001
	g := New(Options{Cores: 2, ProbePPS: 1_000_000, Now: c.now, Delay: func() float64 { return delay },
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu }, Predicted: func() float64 { return predicted }})
	g.Sample()
	admit := func(n int, each float64) {
		t.Helper()
		for i := range n {
			if err := g.Admit("join", each); err != nil {
				t.Fatalf("join %d of %.0f packets/s: %v", i, each, err)
			}
		}
	}
	paced := func(what string) {
		t.Helper()
		err := g.Admit("join", 7500)
		var r *Refusal
		if !errors.As(err, &r) || !r.Paced || r.RetryAfter != time.Second {
			t.Fatalf("%s: %v, want a paced refusal", what, err)
		}
	}
	next := func(p float64) {
		predicted = p
		c.t = c.t.Add(500 * time.Millisecond)
		g.Sample()
	}
	// Nothing carried yet: a fiftieth of the capacity (20,000 packets/s).
	admit(3, 5000)
	paced("past a fiftieth of the capacity from nothing")
	next(20_000)
	admit(3, 5000)
	paced("past a fiftieth again while that is more than a quarter of the load")
	// Carrying 400,000: a quarter of it (100,000) in one sample.
	next(400_000)
	admit(19, 5000)
	paced("past a quarter of what the node carries")
	next(400_000)
	admit(1, 5000)
	// Queues past 5 ms: near the limit, a fiftieth of what it carries
	// (8,000).
	delay = 0.015
	next(400_000)
	admit(1, 5000)
	paced("queues forming: past a fiftieth of what the node carries")
	// Carrying little on a busy machine: minPace a sample all the same.
	next(2000)
	admit(1, 400)
	admit(1, 500)
	paced("queues forming, little carried: past minPace")
}

// A long wait on a lightly loaded node is a pause only while the machine
// has room and it does not come again: on a machine whose CPUs are taken
// (a load generator beside it, the kernel's share of the sends), or a
// second sample in a row, the node's capacity is held where its load is,
// however far above it the node's own CPU per packet puts it.
func TestQueueingDelayOnABusyMachine(t *testing.T) {
	for _, busyMachine := range []bool{true, false} {
		c := &clock{t: time.Unix(1000, 0)}
		var sent uint64
		var cpu, machine, delay float64
		g := New(Options{Cores: 2, ProbePPS: 800_000, Headroom: 0.2, Now: c.now,
			Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
			Machine: func() float64 { return machine }, Delay: func() float64 { return delay }})
		g.Sample()
		sample := func() Status {
			c.t = c.t.Add(time.Second)
			sent += 100_000 // an eighth of what the probe says
			cpu += 0.6
			if busyMachine {
				machine += 1.9
			} else {
				machine += 0.7
			}
			g.Sample()
			return g.Status()
		}
		delay = 0.001
		sample()
		delay = 0.2
		st := sample()
		if held := st.LimitedBy == "queueing"; held != busyMachine {
			t.Errorf("busy machine %v, one sample of 200 ms queues at 100000 packets/s: limited by %s, capacity %.0f",
				busyMachine, st.LimitedBy, st.CapacityPPS)
		}
		st = sample()
		if st.LimitedBy != "queueing" || st.CapacityPPS > 120_000 {
			t.Errorf("busy machine %v, two samples of 200 ms queues: limited by %s, capacity %.0f", busyMachine, st.LimitedBy, st.CapacityPPS)
		}
		if err := g.Admit("join", 100); err == nil {
			t.Errorf("busy machine %v: admitted a join while the queues hold packets", busyMachine)
		}
	}
}

// A node carrying little on a busy machine is not held below minHeld: its
// queues wait for the machine, and refusing the next member of a small
// meeting would help no one.
func TestQueueingDelayHoldsNoLessThanMinHeld(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu, machine float64
	g := New(Options{Cores: 2, ProbePPS: 800_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
		Machine: func() float64 { return machine }, Delay: func() float64 { return 0.2 }})
	g.Sample()
	for range 5 {
		c.t = c.t.Add(time.Second)
		sent += 500
		cpu += 0.01
		machine += 1.95
		g.Sample()
	}
	if st := g.Status(); st.LimitedBy != "queueing" || st.CapacityPPS < minHeld {
		t.Fatalf("500 packets/s on a full machine, queues of 200 ms: limited by %s, capacity %.0f", st.LimitedBy, st.CapacityPPS)
	}
	if err := g.Admit("join", 500); err != nil {
		t.Errorf("a small meeting's next member: %v", err)
	}
}

// Packets taken from endpoints count in the load and the cost as sent
// ones do: a node reading 80,000 packets a second to send 10,000 is not
// charged its whole CPU for the 10,000, and what its senders send counts
// as committed.
func TestReceivedCountsInTheLoad(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent, recv uint64
	var cpu float64
	g := New(Options{Cores: 2, ProbePPS: 200_000, Now: c.now,
		Sent: func() uint64 { return sent }, Received: func() uint64 { return recv },
		CPU: func() float64 { return cpu }, Predicted: func() float64 { return 10_000 }})
	g.Sample()
	for range 20 {
		c.t = c.t.Add(time.Second)
		sent += 10_000
		recv += 80_000
		cpu += 0.45 // 5 µs a packet handled
		g.Sample()
	}
	st := g.Status()
	// (The running cost corrects the probe's 10 µs while the load is at
	// least a quarter of the capacity: it stops near 360,000.)
	if st.CostNS < 4900 || st.CostNS > 5600 || st.CapacityPPS < 350_000 || st.CapacityPPS > 410_000 {
		t.Errorf("cost %.0f ns, capacity %.0f: want about 5000 ns a packet handled, not 45000 a packet sent", st.CostNS, st.CapacityPPS)
	}
	if st.LoadPPS < 89_000 || st.LoadPPS > 91_000 || st.CommittedPPS < 89_000 || st.CommittedPPS > 91_000 {
		t.Errorf("load %.0f, committed %.0f: want the 90000 packets handled", st.LoadPPS, st.CommittedPPS)
	}
}

// While the queues stay long, the held capacity does not follow the load's
// swings up: a video load swinging ±30 % from one sample to the next does
// not let members in at each swing's top.
func TestHoldDoesNotRatchet(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu float64
	g := New(Options{Cores: 2, ProbePPS: 1_000_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
		Delay: func() float64 { return 0.1 }, Predicted: func() float64 { return 100_000 }})
	g.Sample()
	held := 0.0
	for i := range 20 {
		c.t = c.t.Add(time.Second)
		rate := 70_000
		if i%2 == 0 {
			rate = 130_000
		}
		sent += uint64(rate)
		cpu += 0.3
		g.Sample()
		st := g.Status()
		if i >= 2 {
			if st.LimitedBy != "queueing" || st.CapacityPPS > held {
				t.Fatalf("sample %d at %d packets/s: capacity %.0f (held at %.0f), limited by %s", i, rate, st.CapacityPPS, held, st.LimitedBy)
			}
			if err := g.Admit("join", 50); err == nil {
				t.Fatalf("sample %d at %d packets/s: admitted a join while the queues are long", i, rate)
			}
		}
		held = st.CapacityPPS
	}
}

// A hold set while the load was small does not freeze admission once the
// load has grown under quiet queues: the held capacity rises from the
// load it carries (and the shedding its jump set off unwinds), so members
// are admitted again within 30 samples, not the hundreds of a rise from
// the old hold.
func TestHoldReleasesFromTheLoad(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu float64
	delay := 0.2
	g := New(Options{Cores: 2, ProbePPS: 1_000_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
		Delay: func() float64 { return delay }, Predicted: func() float64 { return 0 }})
	g.Sample()
	step := func(rate uint64) Status {
		c.t = c.t.Add(time.Second)
		sent += rate
		cpu += 0.2
		g.Sample()
		return g.Status()
	}
	step(2000)
	if st := step(2000); st.LimitedBy != "queueing" || st.CapacityPPS > 6000 {
		t.Fatalf("a stall at 2,000 packets/s: capacity %.0f limited by %s", st.CapacityPPS, st.LimitedBy)
	}
	delay = 0.001
	for i := range 30 {
		st := step(100_000) // the load grew; the queues are quiet
		if err := g.Admit("join", 100); err == nil {
			t.Logf("admitted after %d samples", i+1)
			return
		} else if i == 29 {
			t.Fatalf("30 quiet samples at 100,000 packets/s after a hold at 2,000: %v (%+v)", err, st)
		}
	}
}

// A machine at least machineFull busy (the node's work and others')
// takes on nothing more, whatever the capacity figure says, and says why;
// nothing is shed for it; admission resumes as soon as the machine has
// room again. A node carrying less than minHeld still admits.
func TestFullMachineAdmitsNothingMore(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu, machine, others float64
	g := New(Options{Cores: 2, ProbePPS: 800_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
		Machine: func() float64 { return machine }, Delay: func() float64 { return 0.001 }})
	g.Sample()
	run := func(pps uint64) Status {
		for range 4 {
			c.t = c.t.Add(time.Second)
			sent += pps
			cpu += 0.5
			machine += 0.5 + others
			g.Sample()
		}
		return g.Status()
	}
	others = 1.2 // 85 % of the machine busy
	st := run(50_000)
	err := g.Admit("join", 100)
	var r *Refusal
	if !errors.As(err, &r) || r.MachineBusy < 0.84 || r.Paced || !strings.Contains(err.Error(), "85 %") {
		t.Fatalf("machine 85 %% busy: admit gave %v (%+v)", err, r)
	}
	if st.LimitedBy != "machine" || st.ShedLevel != 0 || g.Level() != Normal || st.AdmitPPS > max(st.LoadPPS, st.CommittedPPS) {
		t.Fatalf("machine 85 %% busy: %+v (it admits nothing more: no room to publish)", st)
	}
	others = 0.9 // 70 %
	if st := run(50_000); st.LimitedBy != "cpu" {
		t.Fatalf("machine 70 %% busy: limited by %s", st.LimitedBy)
	}
	if err := g.Admit("join", 100); err != nil {
		t.Fatalf("machine 70 %% busy: %v", err)
	}
	others = 1.5 // full, but the node carries little: it still admits
	if st := run(1_000); st.LimitedBy != "cpu" {
		t.Fatalf("a node of 1000 packets/s on a full machine: limited by %s", st.LimitedBy)
	}
	if err := g.Admit("join", 100); err != nil {
		t.Fatalf("a node of 1000 packets/s on a full machine refused: %v", err)
	}
}

// A stall sends less over the sample that sees its long queues: the hold
// set then does not stand under what the admitted members are predicted
// to be sent, so nothing is shed when the node catches up, and nothing
// more is admitted.
func TestHoldNotUnderTheCommittedLoad(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var sent uint64
	var cpu float64
	delay := 0.001
	g := New(Options{Cores: 2, ProbePPS: 1_000_000, Headroom: 0.2, Now: c.now,
		Sent: func() uint64 { return sent }, CPU: func() float64 { return cpu },
		Delay: func() float64 { return delay }, Predicted: func() float64 { return 150_000 }})
	g.Sample()
	step := func(rate uint64) Status {
		c.t = c.t.Add(time.Second)
		sent += rate
		cpu += 0.5
		g.Sample()
		return g.Status()
	}
	for range 4 {
		step(150_000)
	}
	delay = 0.2
	step(40_000) // the stall: long queues, little sent
	for i := range 10 {
		st := step(150_000) // caught up, the queues still long
		if st.LimitedBy != "queueing" || st.CapacityPPS < 150_000/holdAbove-1 || st.ShedLevel != 0 {
			t.Fatalf("sample %d after a stall: %+v; want held at %.0f, nothing shed", i, st, 150_000/holdAbove)
		}
		if err := g.Admit("join", 100); err == nil {
			t.Fatalf("sample %d after a stall: admitted while the queues are long", i)
		}
	}
}
