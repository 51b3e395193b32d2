package node

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

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
		if err == nil && l.Node != "" && l.Node != self {
			n.log.Debug("member not placed: the owner's lease has lapsed", "component", "place", "session", sid, "owner", l.Node)
		}
		return none, false
	}
	owner := busToken(l.Node)
	if !n.registry.Near(busToken(n.cfg.NodeID), owner, within) {
		n.log.Debug("member not placed: the owner is not near", "component", "place", "session", sid, "owner", owner, "within", within)
		return none, false
	}
	for _, a := range n.alternatives(placePPS) {
		if a.Node == owner && a.TokenValid && a.URL != "" {
			return a, true
		}
	}
	n.log.Debug("member not placed: the owner has no room, or takes no token of ours", "component", "place", "session", sid, "owner", owner)
	return none, false
}

// placePPS is the room a node must have for a member to be placed there:
// an audio member's few streams (a video member's are measured only once
// it sends; the owner's admission decides then, and refuses with
// alternatives if it must).
const placePPS = 250

// placeRoom is how much more room (packets/s it would still admit) a
// node must have than this one for a session created here to be handed
// to it: a margin, so that two nodes of about equal load keep their own.
const placeRoom = 1.5

// placeSession hands a session this node just created to the node with
// the most room that answers within webrtc.place_near, if that node has
// placeRoom times this one's (issue 16, new sessions placed by load and
// measured delay; session.Options.OnCreated): this node releases the
// lease and asks that node, over NATS, to adopt the session at once
// (session.Service.HandOff, adoptPlaced). Its members then meet there
// (place). A lone node, or one with placement off, keeps every session.
func (n *Node) placeSession(sid string) {
	within := n.cfg.WebRTC.PlaceNear.Std()
	if within <= 0 || leaseHolder(n.cfg) == "" || n.registry == nil {
		return
	}
	self := busToken(n.cfg.NodeID)
	mine := 0.0
	for _, o := range n.registry.Nodes() {
		if o.ID == self {
			mine = o.Room()
		}
	}
	var to capacity.Alternative
	for _, a := range n.alternatives(0) {
		if a.RoomPPS > to.RoomPPS && n.registry.Near(self, a.Node, within) {
			to = a
		}
	}
	if to.Node == "" || to.RoomPPS < placeRoom*mine {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := n.sessions.HandOff(ctx, sid, func(ctx context.Context) error {
		m, err := n.bus.Conn().RequestWithContext(ctx, placeSubject(to.Node), []byte(sid))
		if err != nil {
			return err
		}
		if string(m.Data) != "adopted" {
			return fmt.Errorf("node %s: %s", to.Node, m.Data)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("new session not placed", "session", sid, "on", to.Node, "err", err)
		return
	}
	n.log.Info("new session placed", "session", sid, "on", to.Node, "room_pps", to.RoomPPS, "here_pps", mine)
}

// placeSubject is where node asks to adopt a session handed to it.
func placeSubject(node string) string { return "convene.place." + busToken(node) }

// adoptPlaced answers the requests to adopt a session another node
// handed to this one (placeSession): "adopted", or why not.
func (n *Node) adoptPlaced() (*nats.Subscription, error) {
	return n.bus.Conn().Subscribe(placeSubject(n.cfg.NodeID), func(m *nats.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		sid := string(m.Data)
		took, err := n.sessions.Adopt(ctx, sid)
		switch {
		case err != nil:
			_ = m.Respond([]byte("not adopted: " + err.Error()))
		case !took:
			_ = m.Respond([]byte("not adopted: another node holds it"))
		default:
			_ = m.Respond([]byte("adopted"))
		}
	})
}
