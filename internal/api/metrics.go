package api

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the API:
//
//	convene_api_requests_total{route, code}          requests served, by route pattern and status
//	convene_api_request_duration_seconds{route}      time to serve a request
//	convene_api_ws_refused_total{reason}             event WebSockets refused or dropped:
//	                                                 session / node (over a cap), ping_timeout
//	convene_api_busy_total{what}                     exports / playbacks / hls / thumbnails refused (503), composites (429 or 503) over their cap
//	convene_api_exports_running                      recordings being exported now
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	wsRefused *prometheus.CounterVec
	busy      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, exports chan struct{}) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convene_api_requests_total", Help: "HTTP API requests served, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "convene_api_request_duration_seconds", Help: "Time to serve an HTTP API request.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route"}),
		wsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convene_api_ws_refused_total", Help: "Event WebSockets refused over a cap or dropped for not answering pings.",
		}, []string{"reason"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convene_api_busy_total", Help: "Exports and playbacks refused with 503 because the node runs its cap of them (recording.exports, recording.playbacks).",
		}, []string{"what"}),
	}
	m.busy.WithLabelValues("export")
	m.busy.WithLabelValues("playback")
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "convene_api_exports_running",
		Help: "Recordings being exported now (at most recording.exports)."}, func() float64 { return float64(len(exports)) })
	reg.MustRegister(m.requests, m.latency, m.wsRefused, m.busy, running)
	return m
}
