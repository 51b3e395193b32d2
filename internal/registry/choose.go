package registry

import (
	"math"
	"sort"
	"time"

	"github.com/convene/convene/internal/bus"
)

// MaxChoices is how many nodes a refusal names at most.
const MaxChoices = 3

// DelayBand is the width of the bands Choose sorts measured delays into:
// nodes whose round trips from the refusing node differ by less are
// equally near (on one LAN they all are), and room decides among them.
const DelayBand = 0.005 // seconds

// Delays is the refusing node's measured round trip to other nodes, by
// node ID (its heartbeat's bus.Load.Peers; package peerdelay).
type Delays map[string]bus.PeerRTT

// band is the delay class of node id: 0, 1, … by DelayBand for a node
// that answered; unknown (never measured, or no reply yet) after every
// measured one; unreachable (no reply to any of the last probes) last.
func (d Delays) band(id string) float64 {
	p, ok := d[id]
	switch {
	case ok && p.Loss >= 1:
		return math.Inf(1)
	case !ok || p.RTTSeconds <= 0:
		return math.MaxFloat64
	}
	return math.Floor(p.RTTSeconds / DelayBand)
}

// Room is the packets/s the node would still admit by its last heartbeat,
// the way its governor admits (package capacity): what it admits up to
// less the more of its load and what it has taken on; 0 while it sheds,
// and 0 when it published no capacity (a node not measured yet, or one
// from before heartbeats said what it admits: its room is unknown).
func (n Node) Room() float64 {
	hb := n.Heartbeat
	if hb.ShedLevel != 0 || hb.AdmitPPS <= 0 {
		return 0
	}
	return math.Max(0, hb.AdmitPPS-math.Max(hb.LoadPPS, hb.CommittedPPS))
}

// Choose picks from nodes the ones a refusal for pps packets/s may send
// a client to: up (not draining, not stopped), not stale, not self, that
// publish an address for clients (a URL or a SIP address), whose Room is
// at least pps (and more than none); nearest first by delays (the
// refusing node's measured round trips, in DelayBand bands; nodes not
// measured after those measured, nodes that answer no probe last), most
// room first within a band (by ID among equals), at most max. With no
// delays (nil) the order is by room alone.
//
// The heartbeats it goes by are up to a heartbeat interval old, so a
// node chosen may refuse after all (and name others): its own admission
// decides.
func Choose(nodes []Node, self string, pps float64, max int, delays Delays) []Node {
	return pick(nodes, self, max, delays, Node.Room, func(n Node) bool {
		room := n.Room()
		return room > 0 && room >= pps && (n.Heartbeat.URL != "" || n.Heartbeat.SIP != "")
	})
}

// pick is the nodes up, fresh, other than self, that ok takes, nearest
// first by delays (in DelayBand bands), most by more within a band (by ID
// among equals), at most max.
func pick(nodes []Node, self string, max int, delays Delays, more func(Node) float64, ok func(Node) bool) []Node {
	var out []Node
	for _, n := range nodes {
		if n.ID != self && n.State == StateUp && !n.Stale && ok(n) {
			out = append(out, n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if bi, bj := delays.band(out[i].ID), delays.band(out[j].ID); bi != bj {
			return bi < bj
		}
		if mi, mj := more(out[i]), more(out[j]); mi != mj {
			return mi > mj
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// WithRoom is Choose over the registry's nodes now, at most MaxChoices,
// by the delays in self's own last heartbeat.
func (r *Registry) WithRoom(self string, pps float64) []Node {
	return Choose(r.Nodes(), self, pps, MaxChoices, r.delaysFrom(self))
}

// delaysFrom is the delay table in node id's last heartbeat.
func (r *Registry) delaysFrom(id string) Delays {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[id]
	if n == nil || len(n.Heartbeat.Peers) == 0 {
		return nil
	}
	d := make(Delays, len(n.Heartbeat.Peers))
	for _, p := range n.Heartbeat.Peers {
		d[p.Node] = p
	}
	return d
}

// Near reports whether node id answers self's delay probes within within
// (its smoothed round trip, in self's last heartbeat), most of the last
// ones answered; unknown is not near.
func (r *Registry) Near(self, id string, within time.Duration) bool {
	p, ok := r.delaysFrom(self)[id]
	return ok && p.Loss < 0.5 && p.RTTSeconds > 0 && p.RTTSeconds <= within.Seconds()
}

// ChooseRecorder picks from nodes those a recording needing bps bits/s
// of disk may be placed on: up, not stale, not self, not shedding (it
// pulls the session's tracks over the bridge), with at least bps of
// recording capacity free (bus.Load.RecordingFreeBps); nearest first by
// delays, as Choose, most free first within a band, at most max.
func ChooseRecorder(nodes []Node, self string, bps float64, max int, delays Delays) []Node {
	free := func(n Node) float64 { return n.Heartbeat.RecordingFreeBps }
	return pick(nodes, self, max, delays, free, func(n Node) bool {
		return n.Room() > 0 && free(n) > 0 && free(n) >= bps
	})
}

// WithRecordingRoom is ChooseRecorder over the registry's nodes now, at
// most MaxChoices, by the delays in self's own last heartbeat.
func (r *Registry) WithRecordingRoom(self string, bps float64) []Node {
	return ChooseRecorder(r.Nodes(), self, bps, MaxChoices, r.delaysFrom(self))
}

// ChooseMixer picks from nodes those a phone that needs a mixer may be
// sent to: up, fresh, not self, with delivery room, a SIP address and a
// mixer free (bus.Load.MixersFree); nearest first, most mixers free
// within a band, at most max.
func ChooseMixer(nodes []Node, self string, max int, delays Delays) []Node {
	free := func(n Node) float64 { return float64(n.Heartbeat.MixersFree) }
	return pick(nodes, self, max, delays, free, func(n Node) bool {
		return n.Room() > 0 && free(n) > 0 && n.Heartbeat.SIP != ""
	})
}

// WithMixerRoom is ChooseMixer over the registry's nodes now, at most
// MaxChoices, by the delays in self's own last heartbeat.
func (r *Registry) WithMixerRoom(self string) []Node {
	return ChooseMixer(r.Nodes(), self, MaxChoices, r.delaysFrom(self))
}
