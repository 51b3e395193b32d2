package registry

import (
	"slices"
	"testing"
	"time"

	"github.com/convene/convene/internal/bus"
)

// roomy is a heartbeat of a node that admits up to admit packets/s, has
// load and committed of it taken, and publishes a URL.
func roomy(id string, admit, load, committed float64) bus.NodeStatus {
	return bus.NodeStatus{NodeID: id, Type: bus.EventHeartbeat, Heartbeat: bus.Heartbeat{
		Load:   bus.Load{CapacityPPS: admit / 0.8, AdmitPPS: admit, LoadPPS: load, CommittedPPS: committed},
		Public: bus.Public{URL: "http://" + id + ".example"}, UptimeSeconds: 10}}
}

func ids(ns []Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

func TestRoomIsWhatTheGovernorWouldAdmit(t *testing.T) {
	for _, c := range []struct {
		admit, load, committed float64
		shed                   int
		want                   float64
	}{
		{1000, 200, 0, 0, 800},
		{1000, 200, 500, 0, 500}, // taken on counts before its media flows
		{1000, 1200, 0, 0, 0},    // past it: none, never negative
		{1000, 0, 0, 1, 0},       // shedding: the governor admits nothing
		{0, 0, 0, 0, 0},          // no capacity published: unknown
	} {
		hb := roomy("a", c.admit, c.load, c.committed).Heartbeat
		hb.ShedLevel = c.shed
		if got := (Node{Heartbeat: hb}).Room(); got != c.want {
			t.Errorf("admit %v load %v committed %v shed %d: room %v, want %v", c.admit, c.load, c.committed, c.shed, got, c.want)
		}
	}
}

// TestChooseSkipsSelfStaleDrainingAndFull: only nodes up, fresh, other,
// with an address and with room for the request are named, most room
// first, three at most.
func TestChooseSkipsSelfStaleDrainingAndFull(t *testing.T) {
	r, w, clk := newTest(t)
	w.fn(roomy("stale", 100_000, 0, 0))
	clk.add(5 * time.Second)
	w.fn(roomy("self", 100_000, 0, 0))
	w.fn(roomy("small", 1000, 900, 0)) // room 100
	w.fn(roomy("b", 5000, 1000, 0))    // room 4000
	w.fn(roomy("c", 9000, 0, 2000))    // room 7000
	w.fn(roomy("d", 3000, 0, 0))       // room 3000
	w.fn(roomy("e", 2000, 0, 0))       // room 2000: fourth
	w.fn(roomy("drain", 100_000, 0, 0))
	w.fn(bus.NodeStatus{NodeID: "drain", Type: bus.EventDraining})
	w.fn(roomy("gone", 100_000, 0, 0))
	w.fn(bus.NodeStatus{NodeID: "gone", Type: bus.EventStopped})
	hidden := roomy("hidden", 100_000, 0, 0) // no address for clients
	hidden.Heartbeat.URL = ""
	w.fn(hidden)
	shedding := roomy("shedding", 100_000, 0, 0)
	shedding.Heartbeat.ShedLevel = 1
	w.fn(shedding)
	phone := roomy("phone", 2500, 0, 0) // a SIP address is enough
	phone.Heartbeat.URL, phone.Heartbeat.SIP = "", "phone.example:5060"
	w.fn(phone)

	if got := ids(r.WithRoom("self", 150)); !slices.Equal(got, []string{"c", "b", "d"}) {
		t.Errorf("for 150 packets/s: %v, want c, b, d", got)
	}
	if got := ids(Choose(r.Nodes(), "self", 150, 10, nil)); !slices.Equal(got, []string{"c", "b", "d", "phone", "e"}) {
		t.Errorf("uncapped: %v", got)
	}
	// Room at least the request: 3500 leaves only b and c.
	if got := ids(r.WithRoom("self", 3500)); !slices.Equal(got, []string{"c", "b"}) {
		t.Errorf("for 3500 packets/s: %v, want c, b", got)
	}
	if got := r.WithRoom("self", 1e6); len(got) != 0 {
		t.Errorf("for 1e6 packets/s: %v, want none", ids(got))
	}
	// Equal room: by ID. A node alone in its registry names none.
	if got := ids(Choose([]Node{{ID: "y", State: StateUp, Heartbeat: roomy("y", 10, 0, 0).Heartbeat},
		{ID: "x", State: StateUp, Heartbeat: roomy("x", 10, 0, 0).Heartbeat}}, "self", 0, 3, nil)); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("equal room: %v, want x, y", got)
	}
	lone, lw, _ := newTest(t)
	lw.fn(roomy("self", 100_000, 0, 0))
	if got := lone.WithRoom("self", 1); len(got) != 0 {
		t.Errorf("a lone node names %v", ids(got))
	}
}

// TestChooseNearestFirst: among nodes with room, the ones nearer the
// refusing node by its measured delays come first; room decides within a
// delay band; nodes not measured follow, nodes that answer no probe come
// last; a node without room stays out however near. WithRoom takes the
// table from the refusing node's own heartbeat.
func TestChooseNearestFirst(t *testing.T) {
	r, w, _ := newTest(t)
	w.fn(roomy("far", 100_000, 0, 0))       // most room, 40 ms away
	w.fn(roomy("near", 2000, 0, 0))         // 1 ms
	w.fn(roomy("near2", 3000, 0, 0))        // 3 ms: same band as near, more room
	w.fn(roomy("full", 1000, 990, 0))       // 0.2 ms but no room
	w.fn(roomy("unmeasured", 50_000, 0, 0)) // not in the table
	w.fn(roomy("cut", 90_000, 0, 0))        // no reply to any probe
	delays := Delays{
		"far":   {Node: "far", RTTSeconds: 0.040},
		"near":  {Node: "near", RTTSeconds: 0.001},
		"near2": {Node: "near2", RTTSeconds: 0.003, Loss: 0.25},
		"full":  {Node: "full", RTTSeconds: 0.0002},
		"cut":   {Node: "cut", Loss: 1},
	}
	want := []string{"near2", "near", "far", "unmeasured", "cut"}
	if got := ids(Choose(r.Nodes(), "self", 100, 10, delays)); !slices.Equal(got, want) {
		t.Errorf("by delay: %v, want %v", got, want)
	}
	if got := ids(Choose(r.Nodes(), "self", 100, 10, nil)); !slices.Equal(got, []string{"far", "cut", "unmeasured", "near2", "near"}) {
		t.Errorf("without delays: %v, want by room", got)
	}
	self := roomy("self", 1000, 0, 0)
	for _, p := range delays {
		self.Heartbeat.Peers = append(self.Heartbeat.Peers, p)
	}
	w.fn(self)
	if got := ids(r.WithRoom("self", 100)); !slices.Equal(got, want[:MaxChoices]) {
		t.Errorf("WithRoom: %v, want %v", got, want[:MaxChoices])
	}
}

// TestNear: a node is near when its smoothed round trip in self's last
// heartbeat is within the bound and most probes were answered; a node
// never measured, or farther, or mostly silent, is not.
func TestNear(t *testing.T) {
	r, w, _ := newTest(t)
	self := roomy("self", 1000, 0, 0)
	self.Heartbeat.Peers = []bus.PeerRTT{{Node: "near", RTTSeconds: 0.002}, {Node: "lossy", RTTSeconds: 0.001, Loss: 0.25},
		{Node: "silent", RTTSeconds: 0.001, Loss: 0.75}, {Node: "far", RTTSeconds: 0.040}, {Node: "new"}}
	w.fn(self)
	for id, want := range map[string]bool{"near": true, "lossy": true, "silent": false, "far": false, "new": false, "unknown": false} {
		if got := r.Near("self", id, 10*time.Millisecond); got != want {
			t.Errorf("Near(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestChooseRecorderByFreeDisk: a recording goes to a fresh node other
// than this one with the disk capacity it needs free and delivery room
// (it pulls the tracks), most free first; a node that sheds, or has too
// little free, is not named.
func TestChooseRecorderByFreeDisk(t *testing.T) {
	rec := func(id string, free float64, admit float64) Node {
		st := roomy(id, admit, 0, 0)
		st.Heartbeat.RecordingFreeBps = free
		return Node{ID: id, State: StateUp, Heartbeat: st.Heartbeat}
	}
	shedding := rec("shed", 9e9, 1000)
	shedding.Heartbeat.ShedLevel = 1
	stale := rec("stale", 9e9, 1000)
	stale.Stale = true
	nodes := []Node{rec("self", 9e9, 1000), rec("small", 1e6, 1000), rec("b", 50e6, 1000), rec("c", 80e6, 1000),
		rec("busy", 90e6, 0), shedding, stale}
	if got := ids(ChooseRecorder(nodes, "self", 5e6, MaxChoices, nil)); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("for 5 Mb/s: %v, want [c b]", got)
	}
	// Nearer first, whatever is free.
	d := Delays{"b": {Node: "b", RTTSeconds: 0.001}, "c": {Node: "c", RTTSeconds: 0.030}}
	if got := ids(ChooseRecorder(nodes, "self", 5e6, MaxChoices, d)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("with delays: %v, want [b c]", got)
	}
	if got := ChooseRecorder(nodes, "self", 100e6, MaxChoices, nil); len(got) != 0 {
		t.Fatalf("for 100 Mb/s: %v, want none", ids(got))
	}
}

// TestChooseMixerByFreeMixers: a phone that needs a mixer goes to a fresh
// node other than this one with a mixer free, room to deliver and a SIP
// address, most mixers free first.
func TestChooseMixerByFreeMixers(t *testing.T) {
	mix := func(id string, free int, sip string) Node {
		st := roomy(id, 1000, 0, 0)
		st.Heartbeat.MixersFree, st.Heartbeat.SIP = free, sip
		return Node{ID: id, State: StateUp, Heartbeat: st.Heartbeat}
	}
	nodes := []Node{mix("self", 9, "self:5060"), mix("none", 0, "none:5060"), mix("b", 2, "b:5060"), mix("c", 5, "c:5060"),
		mix("nosip", 9, "")}
	if got := ids(ChooseMixer(nodes, "self", MaxChoices, nil)); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("%v, want [c b]", got)
	}
}
