package node

import (
	"context"
	"time"

	"github.com/convene/convene/internal/capacity"
)

// place is where a browser member of session sid should meet instead of
// this node, if anywhere (issue 16, placement; sfu.Config.Place): the
// node that owns the session, when it is not this one, holds a live
// lease, is up and fresh with room for another member and takes the
// member's token (registry.WithRoom, through alternatives), and answers
// this node's delay probes within webrtc.place_near. A session's members
// then meet on one node while it has room, and their packets cross no
// bridge: a bridged packet costs a node as much as it saves (the cluster
// benchmark's cost model); members farther away (another institution)
// meet on their own node, and when the owner is full they spill over
// here. A lone node places nobody.
func (n *Node) place(sid string) (capacity.Alternative, bool) {
	var none capacity.Alternative
	within := n.cfg.WebRTC.PlaceNear.Std()
	self := leaseHolder(n.cfg)
	if within <= 0 || self == "" || n.registry == nil {
		return none, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := n.cat.Owner(ctx, sid)
	if err != nil || l.Node == "" || l.Node == self || !l.Expires.After(time.Now()) {
		return none, false
	}
	owner := busToken(l.Node)
	if !n.registry.Near(busToken(n.cfg.NodeID), owner, within) {
		return none, false
	}
	for _, a := range n.alternatives(placePPS) {
		if a.Node == owner && a.TokenValid && a.URL != "" {
			return a, true
		}
	}
	return none, false
}

// placePPS is the room a node must have for a member to be placed there:
// an audio member's few streams (a video member's are measured only once
// it sends; the owner's admission decides then, and refuses with
// alternatives if it must).
const placePPS = 250
