package node

import (
	"time"

	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/peerdelay"
	"github.com/convene/convene/internal/registry"
)

// startPeerDelay answers other nodes' delay probes on this node's ping
// subject and returns the pinger that probes them every interval (the
// heartbeat's; run by the heartbeat goroutine): every node the registry
// lists except those that said they stopped. A node alone probes nobody.
func startPeerDelay(b *bus.Bus, reg *registry.Registry, interval time.Duration) (*peerdelay.Pinger, func(), error) {
	stop, err := peerdelay.Respond(b.Conn(), b.NodeID())
	if err != nil {
		return nil, nil, err
	}
	p := peerdelay.New(peerdelay.Options{Conn: b.Conn(), Self: b.NodeID(), Interval: interval,
		Peers: func() []string {
			var ids []string
			for _, n := range reg.Nodes() {
				if n.State != registry.StateStopped {
					ids = append(ids, n.ID)
				}
			}
			return ids
		}})
	return p, stop, nil
}
