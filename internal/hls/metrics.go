package hls

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the HLS streams' Prometheus collectors.
type Metrics struct {
	streams  prometheus.Gauge
	refused  prometheus.Counter
	starts   prometheus.Counter
	switches prometheus.Counter
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
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.streams, m.refused, m.starts, m.switches)
}
