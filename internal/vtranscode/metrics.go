package vtranscode

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the video transcoders' Prometheus collectors.
type Metrics struct {
	running   prometheus.Gauge
	receivers prometheus.Gauge
	refused   *prometheus.CounterVec
	starts    prometheus.Counter
	frames    prometheus.Counter
	keyframes prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_vtranscode_running",
			Help: "Video transcoders running (one ffmpeg child per source track × codec × size × frame rate)."}),
		receivers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_vtranscode_receivers",
			Help: "Receivers served by the video transcoders."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_vtranscode_refused_total",
			Help: "Video transcoders refused: reason limit (vtranscode.max), cpu (vtranscode.cores by measured load) or capacity (the node's governor)."},
			[]string{"reason"}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_vtranscode_child_starts_total",
			Help: "ffmpeg children started for video transcoders: the first of each and every restart after an exit or a stale heartbeat."}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_vtranscode_frames_total",
			Help: "Frames the video transcoders published (RTP packets with the marker bit), each shared by all of its receivers."}),
		keyframes: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_vtranscode_keyframe_requests_total",
			Help: "Receivers' keyframe requests (PLI, FIR) that reached a video transcoder and went on to its source's publisher."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.running, m.receivers, m.refused, m.starts, m.frames, m.keyframes)
}
