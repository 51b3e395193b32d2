package bus

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// NodeStatus is one node event as a watcher hears it: a heartbeat (with
// Heartbeat set) or the node's draining or stopped.
type NodeStatus struct {
	NodeID    string
	Type      string // EventHeartbeat, EventDraining or EventStopped
	Heartbeat Heartbeat
}

// WatchNodes calls fn with every heartbeat, draining and stopped event of
// every node, this one included, from the NATS goroutine of the
// subscription: fn must not block. Messages that do not decode are
// dropped. The returned stop ends the watch; Close also does.
func (b *Bus) WatchNodes(fn func(NodeStatus)) (stop func(), err error) {
	handle := func(m *nats.Msg) {
		// convene.node.<nodeID>.<type>
		rest, ok := strings.CutPrefix(m.Subject, NodePrefix+".")
		if !ok {
			return
		}
		id, typ, ok := strings.Cut(rest, ".")
		if !ok || ValidateToken(id) != nil {
			return
		}
		st := NodeStatus{NodeID: id, Type: typ}
		if typ == EventHeartbeat {
			var ev struct {
				Data *Heartbeat `json:"data"`
			}
			ev.Data = &st.Heartbeat
			if json.Unmarshal(m.Data, &ev) != nil {
				return
			}
		}
		fn(st)
	}
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			s.Unsubscribe() //nolint:errcheck // closed connections drop subscriptions anyway
		}
	}
	for _, typ := range []string{EventHeartbeat, EventDraining, EventStopped} {
		s, err := b.nc.Subscribe(NodePrefix+".*."+typ, handle)
		if err != nil {
			stop()
			return nil, fmt.Errorf("bus: watch nodes: %w", err)
		}
		subs = append(subs, s)
	}
	return stop, nil
}
