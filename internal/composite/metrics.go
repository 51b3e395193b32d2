package composite

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the composites' Prometheus collectors.
type Metrics struct {
	running prometheus.Gauge
	refused *prometheus.CounterVec
	starts  prometheus.Counter
	frames  prometheus.Counter
	layouts prometheus.Counter
	benched prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_composite_running",
			Help: "Video composites running on the node."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_composite_refused_total",
			Help: "Composites refused: reason limit (composite.max), cpu (composite.cores by measured load) or capacity (the node's governor)."},
			[]string{"reason"}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_composite_child_starts_total",
			Help: "ffmpeg children started for composites: the first of each, every restart after an exit or a stale heartbeat, and every change of layout inputs."}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_composite_frames_total",
			Help: "Frames the composites published (RTP packets with the marker bit)."}),
		layouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_composite_input_changes_total",
			Help: "Times a composite changed the cameras it shows (each starts a new child)."}),
		benched: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_composite_keyless_cameras_total",
			Help: "Cameras a composite left out for a while because they sent no keyframe for 6 s (they would stall the picture)."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.running, m.refused, m.starts, m.frames, m.layouts, m.benched)
}
