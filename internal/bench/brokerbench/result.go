package brokerbench

import "time"

// Scenario names: the seed's tables.
const (
	ScenarioAudio         = "single-audio"      // Table 1: one audio meeting of growing size
	ScenarioVideo         = "single-video"      // Table 2: one video meeting of growing size
	ScenarioCombined      = "audio+video"       // Tables 3/4: one audio and one video meeting of the same size
	ScenarioMultiVideo    = "multi-video"       // Table 5: many 20-person video meetings
	ScenarioMultiCombined = "multi-audio+video" // Tables 6/7: many 20-person meetings, half audio, half video
)

// Subscriber is one reported listener (the seed reported the first 4,
// middle 4 and last 4 by subscription order).
type Subscriber struct {
	Index        int     `json:"index"` // subscription order within its meeting
	Meeting      int     `json:"meeting"`
	Kind         string  `json:"kind"` // audio or video
	AvgLatencyMs float64 `json:"avg_latency_ms"`
	JitterMs     float64 `json:"jitter_ms"` // RFC 3550 interarrival jitter
	LossPct      float64 `json:"loss_pct"`
	LatePct      float64 `json:"late_pct"` // later than 100 ms (counts as lost)
	Packets      uint64  `json:"packets"`
}

// KindSummary aggregates the reported subscribers of one media kind.
type KindSummary struct {
	Kind           string  `json:"kind"`
	FirstLatencyMs float64 `json:"first_latency_ms"` // first subscriber
	LastLatencyMs  float64 `json:"last_latency_ms"`  // last subscriber
	AvgLatencyMs   float64 `json:"avg_latency_ms"`   // over the reported subscribers
	AvgJitterMs    float64 `json:"avg_jitter_ms"`
	AvgLatePct     float64 `json:"avg_late_pct"`
	LastLatePct    float64 `json:"last_late_pct"`
	LossPct        float64 `json:"loss_pct"` // over every subscriber, not only the reported
	LatePct        float64 `json:"late_pct"` // over every subscriber
	InMbps         float64 `json:"in_mbps"`
	OutMbps        float64 `json:"out_mbps"`
}

// Point is one measured configuration of one system.
type Point struct {
	System       string        `json:"system"` // "convene", "nats-server", ...
	Scenario     string        `json:"scenario"`
	Meetings     int           `json:"meetings"`
	PerMeeting   int           `json:"per_meeting"` // participants per meeting (1 speaker + listeners)
	Participants int           `json:"participants"`
	Duration     time.Duration `json:"duration_ns"`
	Kinds        []KindSummary `json:"kinds"`
	Subscribers  []Subscriber  `json:"subscribers"`
	// DeliveredPPS is packets/s that reached listeners; ProbeFraction is it
	// divided by the machine probe's delivered packets/s in the same run.
	DeliveredPPS  float64 `json:"delivered_pps"`
	ProbeFraction float64 `json:"probe_fraction"`
	// CPUBusyPct and CPUStealPct are the whole machine's CPU while the
	// speakers ran: busy (user, system, softirq…) and stolen by the
	// hypervisor, in % of all cores.
	CPUBusyPct  float64 `json:"cpu_busy_pct"`
	CPUStealPct float64 `json:"cpu_steal_pct"`
	// Pass: 0 % late (and lost) packets and average latency under 20 ms.
	Pass  bool   `json:"pass"`
	Error string `json:"error,omitempty"`
	// StealRerun: this point failed while the hypervisor stole more than
	// StealRerunPct of the CPU, so the same size was measured once more
	// and that next point decided the bisection. Rerun marks that next
	// point.
	StealRerun bool `json:"steal_rerun,omitempty"`
	Rerun      bool `json:"rerun,omitempty"`
}

// StealRerunPct is the CPU steal above which a failed point is measured
// again once: on this kind of shared VM the hypervisor at times takes a
// third of the CPU for seconds, and one stall of 100 ms fails a point.
// The rerun is held to the same bar, every system gets the same rule, and
// the report keeps both points.
const StealRerunPct = 10.0

// Max is the largest passing size that bisection found for a system in a
// scenario, with the first failing size above it.
type Max struct {
	System       string `json:"system"`
	Scenario     string `json:"scenario"`
	Participants int    `json:"participants"` // largest passing (0: none passed)
	Meetings     int    `json:"meetings"`
	FailedAt     int    `json:"failed_at"` // smallest failing tried (0: none failed)
}

// Probe is the machine's own limit, measured in the same run.
type Probe struct {
	Subscribers  int     `json:"subscribers"`
	PacketSize   int     `json:"packet_size"`
	DeliveredPPS float64 `json:"delivered_pps"`
	SentPPS      float64 `json:"sent_pps"`
	Seconds      float64 `json:"seconds"`
	CPUStealPct  float64 `json:"cpu_steal_pct"` // CPU stolen by the hypervisor meanwhile
	// Relay: the datagrams went through the probe's minimal relay thread
	// (probe -R), crossing the kernel twice, as through an RTP relay.
	Relay bool `json:"relay"`
}

// Report is a whole run of the suite.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     string    `json:"host"` // CPU model, cores, kernel
	Quick    bool      `json:"quick"`
	Probes   []Probe   `json:"probes"`
	Points   []Point   `json:"points"`
	Maxima   []Max     `json:"maxima"`
	Notes    []string  `json:"notes"` // e.g. a peer that could not run, missed targets
}
