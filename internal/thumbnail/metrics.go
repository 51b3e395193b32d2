package thumbnail

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the grabbers' Prometheus collectors.
type Metrics struct {
	grabbers prometheus.Gauge
	images   prometheus.Counter
	refused  prometheus.Counter
	bad      prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		grabbers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_thumbnail_grabbers",
			Help: "Video tracks whose thumbnails are taken now."}),
		images: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_thumbnail_images_total",
			Help: "Thumbnails taken (JPEG images decoded from video tracks)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_thumbnail_refused_total",
			Help: "Thumbnail grabbers refused because the node ran streaming.thumbnails_max of them."}),
		bad: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_thumbnail_bad_images_total",
			Help: "Images of an ffmpeg child that did not read as a baseline JPEG (skipped)."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.grabbers, m.images, m.refused, m.bad)
}
