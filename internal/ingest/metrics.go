package ingest

import "github.com/prometheus/client_golang/prometheus"

// Why a datagram is dropped.
var dropReasons = []string{"source", "unknown_pt", "streams", "truncated", "bad_version", "rtcp_unknown", "too_big"}

const (
	dropSource = iota
	dropUnknownPT
	dropStreams
	dropTruncated
	dropBadVersion
	dropRTCPUnknown
	dropTooBig
)

// Metrics are the endpoints' counters, shared by every endpoint of a node.
type Metrics struct {
	endpoints prometheus.Gauge
	packets   prometheus.Counter
	dropped   *prometheus.CounterVec
}

// NewMetrics makes unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		endpoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_ingest_endpoints",
			Help: "RTP ingest endpoints open (ad-hoc recordings)."}),
		packets: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_ingest_packets_total",
			Help: "RTP and RTCP datagrams ingest endpoints accepted."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_ingest_dropped_total",
			Help: "Datagrams ingest endpoints dropped, by reason: source (not an allowed sender), unknown_pt (a payload type with no known codec), streams (past the endpoint's cap), truncated, bad_version, rtcp_unknown (RTCP of no stream seen), too_big."},
			[]string{"reason"}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) {
	reg.MustRegister(m.endpoints, m.packets, m.dropped)
}
