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
	// AdmitPPS is the load up to which the node admits (its capacity less
	// the headroom) and CommittedPPS what it has taken on (its members'
	// predicted packets/s, which count before their media flows): the
	// node admits a request of p packets/s while max(LoadPPS,
	// CommittedPPS) + p ≤ AdmitPPS and ShedLevel is 0, so another node can
	// tell from the heartbeat whether it has room (package registry).
	AdmitPPS     float64 `json:"admit_pps"`
	CommittedPPS float64 `json:"committed_pps"`
	// Peers is the node's measured delay to each other node it knows
	// (package peerdelay), by node ID; placement prefers the nearer
	// (registry.Choose).
	Peers []PeerRTT `json:"peers,omitempty"`
	// RTPLinks sums what the node's plain RTP endpoints' receiver reports
	// say of the streams it sends them (package rtplink).
	RTPLinks *LinkQuality `json:"rtp_links,omitempty"`
	// RecordingFreeBps is the disk capacity its recordings have not
	// reserved (recording.capacity_mbps or the start-up probe, in bits/s;
	// 0 on a node that does not record): where a recording may be placed.
	RecordingFreeBps float64 `json:"recording_free_bps"`
	// MixersFree is how many more mixers the node would start now (package
	// mixer): where a phone that needs one may be sent.
	MixersFree int `json:"mixers_free"`
}

// PeerRTT is one node's measured round trip to another over NATS: a
// request on the other's PingSubject and its reply.
type PeerRTT struct {
	Node string `json:"node"`
	// RTTSeconds is the smoothed round-trip time (RFC 6298's SRTT, gain
	// 1/8); 0 until a reply came.
	RTTSeconds float64 `json:"rtt_seconds"`
	// Loss is the share of the last probes (16 at most) that got no
	// reply within the timeout.
	Loss float64 `json:"loss"`
}

// LinkQuality is the summary of the node's plain RTP links' receiver
// reports in a heartbeat.
type LinkQuality struct {
	// Reporting is how many links sent a receiver report lately; Lossy
	// how many of them reported more than 5 % lost (fraction lost of
	// their last report); Lossiest their IDs, 8 at most.
	Reporting int      `json:"reporting"`
	Lossy     int      `json:"lossy"`
	Lossiest  []string `json:"lossiest,omitempty"`
	// MaxJitterSeconds is the largest interarrival jitter reported.
	MaxJitterSeconds float64 `json:"max_jitter_seconds"`
}

// Public is where clients reach a node, as it publishes it so that a node
// that refuses a client over capacity can name it (package registry).
// Only addresses the node serves clients on anyway.
type Public struct {
	// URL is the base URL of the node's API and web app (http.public_url).
	URL string `json:"public_url,omitempty"`
	// SIP is the host:port phones reach the node's SIP server at; empty
	// when it has none.
	SIP string `json:"sip,omitempty"`
	// TokenKey identifies the key that signs the node's tokens
	// (auth.Signer.KeyID): nodes that show the same one accept each
	// other's join and member tokens.
	TokenKey string `json:"token_key,omitempty"`
}

// Rates are a node's load per second over the interval since its previous
// heartbeat, derived from two Loads; zero in a node's first heartbeat.
type Rates struct {
	PacketsInPerSecond  float64 `json:"packets_in_per_second"`
	PacketsOutPerSecond float64 `json:"packets_out_per_second"`
	// CPUCores is the process's CPU time per second of wall time: 1.5 is
	// one and a half cores busy.
	CPUCores float64 `json:"cpu_cores"`
}

// rates is what changed from prev to cur in dt, per second. A counter that
// went down (a restart) counts as no change.
func rates(prev, cur Load, dt time.Duration) Rates {
	sec := dt.Seconds()
	if sec <= 0 {
		return Rates{}
	}
	per := func(a, b float64) float64 {
		if b < a {
			return 0
		}
		return (b - a) / sec
	}
	return Rates{
		PacketsInPerSecond:  per(float64(prev.PacketsIn), float64(cur.PacketsIn)),
		PacketsOutPerSecond: per(float64(prev.PacketsOut), float64(cur.PacketsOut)),
		CPUCores:            per(prev.CPUSeconds, cur.CPUSeconds),
	}
}

// Heartbeat is the Data of a heartbeat Event. Load's, Rates' and Public's fields
// are inlined in the JSON object.
type Heartbeat struct {
	Load
	Rates
	Public
	UptimeSeconds float64 `json:"uptime_seconds"`
	Version       string  `json:"version"`
}

// SetPublic sets where clients reach this node, for the heartbeats from
// the next one on.
func (b *Bus) SetPublic(p Public) {
	b.mu.Lock()
	b.public = p
	b.mu.Unlock()
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

	var (
		prev   Load
		prevAt time.Time
	)
	beat := func() {
		var hb Heartbeat
		if load != nil {
			hb.Load = load()
		}
		now := b.now()
		if !prevAt.IsZero() {
			hb.Rates = rates(prev, hb.Load, now.Sub(prevAt))
		}
		prev, prevAt = hb.Load, now
		hb.UptimeSeconds = now.Sub(b.started).Seconds()
		hb.Version = b.version
		b.mu.Lock()
		hb.Public = b.public
		b.mu.Unlock()
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
