package api

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the API:
//
//	convene_api_requests_total{route, code}          requests served, by route pattern and status
//	convene_api_request_duration_seconds{route}      time to serve a request
//	convene_api_ws_refused_total{reason}             event WebSockets refused or dropped:
//	                                                 session / node (over a cap), ping_timeout
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	wsRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
	}
	reg.MustRegister(m.requests, m.latency, m.wsRefused)
	return m
}
