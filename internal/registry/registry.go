// Package registry is the node registry of a Convene cluster: every node's
// last heartbeat (its load and capacity, bus.Heartbeat), whether it said it
// is draining or stopped, and whether it has gone stale — no heartbeat for
// Options.Stale (5 s, with heartbeats every 2 s). Each node keeps its own
// registry from the heartbeats on NATS; nothing of it is stored in SQL.
//
// Staleness is judged by the receiving node's clock at arrival, never by
// the sender's timestamps, so clock skew between machines does not matter.
// A node stale for Options.Forget (5 min) is dropped from the registry.
//
// Choose (WithRoom) picks the nodes an over-capacity refusal names: up,
// fresh, not the refusing node, with room for the request by their last
// heartbeat; nearest first by the refusing node's measured delays (its
// own heartbeat's peers, package peerdelay), most room first among equally
// near ones.
//
// The registry's state is guarded by one mutex, held only to read or write
// the map; the watch callback runs on the NATS subscription's goroutine.
package registry

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/convene/convene/internal/bus"
)

// Node states, from the node's own events.
const (
	StateUp       = "up"
	StateDraining = "draining"
	StateStopped  = "stopped"
)

// Watcher delivers node events; *bus.Bus is one.
type Watcher interface {
	WatchNodes(fn func(bus.NodeStatus)) (stop func(), err error)
}

// Options configure a Registry.
type Options struct {
	Watcher Watcher
	// Stale is how long without a heartbeat makes a node stale (default
	// 5 s); Forget how long a stale node stays listed (default 5 min).
	Stale, Forget time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Node is what the registry knows of one node.
type Node struct {
	ID string `json:"id"`
	// State is what the node last said: up (heartbeats), draining or
	// stopped.
	State string `json:"state"`
	// Stale is true once no heartbeat has arrived for Options.Stale.
	Stale bool `json:"stale"`
	// LastHeartbeat is when this node received the last one (zero if it
	// has heard only a draining or stopped event); AgeSeconds is how long
	// ago that was.
	LastHeartbeat time.Time     `json:"last_heartbeat"`
	AgeSeconds    float64       `json:"age_seconds"`
	Heartbeat     bus.Heartbeat `json:"heartbeat"`

	heard time.Time // the last event of any kind, for Forget
}

// Registry is the cluster's nodes as this node hears them.
type Registry struct {
	o       Options
	stop    func()
	started time.Time // when it began to listen

	mu    sync.Mutex
	nodes map[string]*Node
}

// New starts watching node events.
func New(o Options) (*Registry, error) {
	if o.Stale <= 0 {
		o.Stale = 5 * time.Second
	}
	if o.Forget <= 0 {
		o.Forget = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry{o: o, nodes: map[string]*Node{}, started: o.Now()}
	stop, err := o.Watcher.WatchNodes(r.hear)
	if err != nil {
		return nil, err
	}
	r.stop = stop
	return r, nil
}

// Close stops watching.
func (r *Registry) Close() { r.stop() }

// hear takes one node event.
func (r *Registry) hear(st bus.NodeStatus) {
	now := r.o.Now()
	r.mu.Lock()
	n := r.nodes[st.NodeID]
	fresh := n == nil
	if fresh {
		n = &Node{ID: st.NodeID}
		r.nodes[st.NodeID] = n
	}
	n.heard = now
	switch st.Type {
	case bus.EventHeartbeat:
		// A heartbeat after "stopped" is the node back. After "draining"
		// the node is still draining, unless its uptime went down: a new
		// process with the same ID.
		if n.State != StateDraining || st.Heartbeat.UptimeSeconds < n.Heartbeat.UptimeSeconds {
			n.State = StateUp
		}
		n.LastHeartbeat, n.Heartbeat = now, st.Heartbeat
	case bus.EventDraining:
		n.State = StateDraining
	case bus.EventStopped:
		n.State = StateStopped
	}
	r.mu.Unlock()
	if fresh {
		r.o.Logger.Info("node joined the registry", "component", "registry", "node", st.NodeID, "event", st.Type)
	}
}

// Nodes returns every node heard within Options.Forget, ordered by ID,
// with Stale and AgeSeconds as of now.
func (r *Registry) Nodes() []Node {
	now := r.o.Now()
	r.mu.Lock()
	out := make([]Node, 0, len(r.nodes))
	for id, n := range r.nodes {
		if now.Sub(n.heard) >= r.o.Forget {
			delete(r.nodes, id)
			continue
		}
		c := *n
		if n.LastHeartbeat.IsZero() { // heard only a draining or stopped event
			c.Stale = true
		} else {
			age := now.Sub(n.LastHeartbeat)
			c.Stale, c.AgeSeconds = age >= r.o.Stale, age.Seconds()
		}
		out = append(out, c)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Gone reports whether node id is taken for dead: no heartbeat for
// Options.Stale, or it said it stopped, or it was never heard although
// the registry has listened for longer than Options.Stale (a node that
// died before this one started, or was forgotten). A node just started
// takes nobody for dead before it could have heard their heartbeats.
// The node restarts a dead node's media services (node/failover.go).
func (r *Registry) Gone(id string) bool {
	now := r.o.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[id]
	switch {
	case n == nil:
		return now.Sub(r.started) >= r.o.Stale
	case n.State == StateStopped:
		return true
	case n.LastHeartbeat.IsZero(): // heard draining only
		return now.Sub(n.heard) >= r.o.Stale
	}
	return now.Sub(n.LastHeartbeat) >= r.o.Stale
}
