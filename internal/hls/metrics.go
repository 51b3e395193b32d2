package hls

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the HLS streams' Prometheus collectors.
type Metrics struct {
	streams  prometheus.Gauge
	refused  prometheus.Counter
	starts   prometheus.Counter
	switches prometheus.Counter
	// held counts the viewers' requests a stream holds now (blocking
	// playlist reloads, preload hints); heldRefused those refused at a
	// stream's Options.HeldMax, heldTimeouts those answered 503 at
	// Options.Hold.
	held         prometheus.Gauge
	heldRefused  prometheus.Counter
	heldTimeouts prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_hls_streams",
			Help: "Sessions streamed as HLS now."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_hls_refused_total",
			Help: "HLS streams refused because the node ran streaming.hls_max of them."}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_hls_child_starts_total",
			Help: "ffmpeg children started for HLS streams (the first of each stream and every restart)."}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_hls_video_switches_total",
			Help: "Times an HLS stream changed the camera it shows."}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_hls_held_requests",
			Help: "HLS viewer requests held now: blocking playlist reloads and preload hints waiting for a part."}),
		heldRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_hls_held_refused_total",
			Help: "HLS viewer requests refused (503) because their stream held as many as it may."}),
		heldTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_hls_held_timeouts_total",
			Help: "Held HLS viewer requests answered 503 because what they waited for was not made in time."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.streams, m.refused, m.starts, m.switches, m.held, m.heldRefused, m.heldTimeouts)
}
