package rtplink

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the plain RTP links' receiver reports, all links together
// (no per-link series: a link's own figures are in its Stats.Quality):
//
//	convene_rtplink_report_fraction_lost     histogram: fraction lost of each report block
//	convene_rtplink_report_jitter_seconds    histogram: interarrival jitter of each report block
//	convene_rtplink_rtt_seconds              histogram: each node↔endpoint round trip measured
//
// Share one Metrics among all links (Config.Metrics); nil records none.
type Metrics struct {
	lost, jitter, rtt prometheus.Histogram
}

// NewMetrics returns the links' metrics; Register adds them to reg.
func NewMetrics() *Metrics {
	return &Metrics{
		lost: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_rtplink_report_fraction_lost",
			Help:    "Fraction lost in the report blocks plain RTP endpoints sent about the streams the node sends them.",
			Buckets: []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5}}),
		jitter: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_rtplink_report_jitter_seconds",
			Help:    "Interarrival jitter in the report blocks plain RTP endpoints sent (by the link's clock rate).",
			Buckets: []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2}}),
		rtt: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_rtplink_rtt_seconds",
			Help:    "Round trips between the node and plain RTP endpoints, from their reports' LSR and DLSR.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) {
	reg.MustRegister(m.lost, m.jitter, m.rtt)
}
