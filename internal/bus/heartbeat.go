package bus

import (
	"context"
	"time"
)

// DefaultHeartbeatInterval is used by RunHeartbeat for non-positive intervals.
const DefaultHeartbeatInterval = 5 * time.Second

// Load is a node's load snapshot reported in heartbeats.
type Load struct {
	Sessions   int     `json:"sessions"`
	Links      int     `json:"links"`
	Tracks     int     `json:"tracks"`
	PacketsIn  uint64  `json:"packets_in"`
	PacketsOut uint64  `json:"packets_out"`
	Drops      uint64  `json:"drops"`
	Goroutines int     `json:"goroutines"`
	HeapBytes  uint64  `json:"heap_bytes"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CapacityPPS is the node's delivery capacity and LoadPPS its load,
	// in packets/s sent; ShedLevel how much it sheds (0 none, 3 all
	// video). Package capacity.
	CapacityPPS float64 `json:"capacity_pps"`
	LoadPPS     float64 `json:"load_pps"`
	ShedLevel   int     `json:"shed_level"`
}

// Heartbeat is the Data of a heartbeat Event. Load's fields are inlined in
// the JSON object.
type Heartbeat struct {
	Load
	UptimeSeconds float64 `json:"uptime_seconds"`
	Version       string  `json:"version"`
}

// RunHeartbeat publishes a heartbeat on convene.node.<nodeID>.heartbeat
// immediately and then every interval until ctx is done or the bus is
// closed. load may be nil (zero load is reported). It blocks; run it in its
// own goroutine. Publish failures are logged, not returned.
func (b *Bus) RunHeartbeat(ctx context.Context, interval time.Duration, load func() Load) {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return
	}
	b.hbWG.Add(1)
	b.mu.Unlock()
	defer b.hbWG.Done()

	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	subject, err := HeartbeatSubject(b.nodeID)
	if err != nil { // unreachable: NodeID is validated by Connect
		b.log.Error("heartbeat subject", "err", err)
		return
	}

	beat := func() {
		var hb Heartbeat
		if load != nil {
			hb.Load = load()
		}
		hb.UptimeSeconds = b.now().Sub(b.started).Seconds()
		hb.Version = b.version
		if err := b.Publish(subject, Event{Type: EventHeartbeat, Data: hb}); err != nil {
			b.log.Warn("heartbeat publish failed", "err", err)
		}
	}

	beat()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.done:
			return
		case <-t.C:
			beat()
		}
	}
}
