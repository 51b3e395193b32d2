package recorder

import "github.com/prometheus/client_golang/prometheus"

// Drop reasons (convene_recorder_dropped_packets_total{reason}).
const (
	dropQueueFull = "queue_full" // the writer fell behind: a slow disk
	dropMalformed = "malformed"  // too short to name its SSRC
	dropFailed    = "failed"     // the recording had stopped on a write error
)

var dropReasons = [...]string{dropQueueFull, dropMalformed, dropFailed}

// Metrics are the recorder's Prometheus collectors:
//
//	convene_recorder_recordings                   recordings running now
//	convene_recorder_streams                      stream files open now
//	convene_recorder_packets_total                packets written (RTP and RTCP)
//	convene_recorder_bytes_total                  packet bytes written
//	convene_recorder_dropped_packets_total{reason} packets not recorded
//	convene_recorder_slow_disk_total              flush periods in which a queue overflowed
//	convene_recorder_write_errors_total           recordings stopped by a write error
type Metrics struct {
	recordings  prometheus.Gauge
	streams     prometheus.Gauge
	packets     prometheus.Counter
	bytes       prometheus.Counter
	dropped     *prometheus.CounterVec
	slowDisk    prometheus.Counter
	writeErrors prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		recordings: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_recorder_recordings",
			Help: "Recordings running now."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_recorder_streams",
			Help: "Stream files (one per SSRC) open for recording now."}),
		packets: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_recorder_packets_total",
			Help: "RTP and RTCP packets written to recordings."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_recorder_bytes_total",
			Help: "Bytes of packets written to recordings (without the rtpdump framing)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_recorder_dropped_packets_total",
			Help: "Packets a recording did not keep, by reason (queue_full: the disk is too slow)."}, []string{"reason"}),
		slowDisk: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_recorder_slow_disk_total",
			Help: "Flush periods in which a recording's queue overflowed (slow disk)."}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_recorder_write_errors_total",
			Help: "Recordings stopped by a write error (disk full, I/O error)."}),
	}
	for _, r := range dropReasons {
		m.dropped.WithLabelValues(r)
	}
	return m
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.recordings, m.streams, m.packets, m.bytes, m.dropped, m.slowDisk, m.writeErrors)
}
