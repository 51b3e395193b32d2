package registry

import (
	"math"
	"sort"
)

// MaxChoices is how many nodes a refusal names at most.
const MaxChoices = 3

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
// at least pps (and more than none); most room first (by ID among
// equals), at most max.
//
// The heartbeats it goes by are up to a heartbeat interval old, so a
// node chosen may refuse after all (and name others): its own admission
// decides.
func Choose(nodes []Node, self string, pps float64, max int) []Node {
	var out []Node
	for _, n := range nodes {
		room := n.Room()
		if n.ID == self || n.State != StateUp || n.Stale || room <= 0 || room < pps ||
			(n.Heartbeat.URL == "" && n.Heartbeat.SIP == "") {
			continue
		}
		out = append(out, n)
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := out[i].Room(), out[j].Room()
		if ri != rj {
			return ri > rj
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// WithRoom is Choose over the registry's nodes now, at most MaxChoices.
func (r *Registry) WithRoom(self string, pps float64) []Node {
	return Choose(r.Nodes(), self, pps, MaxChoices)
}
