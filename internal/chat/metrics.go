package chat

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	sockets  prometheus.Gauge
	accepted *prometheus.CounterVec
	refused  *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	relayed  prometheus.Counter
	caughtUp prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_chat_sockets",
			Help: "Members' conversation sockets open."}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_chat_messages_total",
			Help: "Conversation messages accepted (stored and forwarded), by flow."}, []string{"flow"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_chat_refused_total",
			Help: "Conversation messages refused, by reason: refused (size, header), rate_limited, floor, unavailable (the catalog)."}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_chat_closed_total",
			Help: "Conversation sockets the node closed, by reason: slow_socket (its queue was full); and frames from other nodes dropped: bad_relay."}, []string{"reason"}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_chat_relayed_total",
			Help: "Conversation messages other nodes accepted and this node forwarded to its sockets."}),
		caughtUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_chat_caught_up_total",
			Help: "Conversation messages another node accepted whose relay never came (sent before this node's subscription reached the cluster) and that this node found in the catalog and forwarded."}),
	}
	for _, r := range []string{"refused", "rate_limited", "floor", "unavailable"} {
		m.refused.WithLabelValues(r)
	}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) {
	reg.MustRegister(m.sockets, m.accepted, m.refused, m.dropped, m.relayed, m.caughtUp)
}
