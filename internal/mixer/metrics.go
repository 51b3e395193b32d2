package mixer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the mixers' Prometheus collectors (Register adds them).
type Metrics struct {
	mixers    prometheus.Gauge
	refused   prometheus.Counter
	frames    prometheus.Counter
	dropped   *prometheus.CounterVec
	late      prometheus.Histogram
	work      prometheus.Histogram
	lateTicks prometheus.Counter
	beeps     prometheus.Counter
	panics    prometheus.Counter
	restarts  prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		mixers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_mixers",
			Help: "Audio mixers running now (one per session subgroup with mixed endpoints)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_refused_total",
			Help: "Mixers refused because the node's mixing capacity was used up."}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_frames_encoded_total",
			Help: "Mixed 20 ms frames encoded (one per codec and mix, shared by the outputs that hear it)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_mixer_dropped_packets_total",
			Help: "Input packets the mixer could not use, by reason."}, []string{"reason"}),
		late: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_mixer_tick_late_seconds",
			Help:    "How late a mixer's 20 ms tick finished after its due time.",
			Buckets: []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}}),
		work: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_mixer_tick_seconds",
			Help:    "Time one mixer's tick takes (mix, encode, send).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 12)}),
		lateTicks: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_missed_ticks_total",
			Help: "20 ms frames a mixer could not produce in time."}),
		beeps: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_floor_tones_total",
			Help: "Short tones played to members' mixed endpoints because they were granted the floor."}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_crashes_total",
			Help: "Mixers whose tick panicked (each is restarted by the supervisor)."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_mixer_restarts_total",
			Help: "Mixers replaced because they stopped ticking."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.mixers, m.refused, m.frames, m.dropped, m.late, m.work, m.lateTicks, m.beeps, m.panics, m.restarts)
}

func (m *Metrics) drop(r dropReason) {
	if r != dropNone {
		m.dropped.WithLabelValues(dropNames[r]).Inc()
	}
}

func (m *Metrics) tick(late, took time.Duration) {
	m.late.Observe(max(0, late).Seconds())
	m.work.Observe(took.Seconds())
}
