package sip

import "github.com/prometheus/client_golang/prometheus"

// metrics are the SIP metrics, registered on the node's registry:
//
//	convene_sip_requests_total{method}        requests received
//	convene_sip_auth_failures_total{reason}   failed digest checks (bad_response, unknown_user,
//	                                           stale, bad_nonce, bad_header, forbidden)
//	convene_sip_challenges_total               401/407 challenges sent
//	convene_sip_rate_limited_total{method}     requests refused with 503 by the per-source limit
//	convene_sip_registrations                  current bindings (registered contacts)
//	convene_sip_registers_total{result}        REGISTERs answered: ok, challenged, failed
//	convene_sip_calls_total{result}            INVITEs proxied, by outcome: answered, failed,
//	                                           canceled, not_found, unavailable; dial-ins:
//	                                           conference, conference_refused, conference_moved
//	convene_sip_calls_active                   answered calls not yet ended with BYE
//	convene_sip_contacts_dropped_total         contacts dropped because they stopped answering
//	convene_sip_bad_messages_total             requests refused or dropped as malformed
//	convene_sip_denied_total{reason}           requests refused as abuse: dialog (in-dialog
//	                                           request without this proxy's dialog token),
//	                                           no_relay (re-offer outside a relayed call),
//	                                           contacts (over the contacts cap), tcp_conns
//	                                           (TCP connection over a cap), tcp_idle (closed idle)
//	convene_sip_register_commit_seconds        time to make a batch of bindings durable
type metrics struct {
	requests      *prometheus.CounterVec
	authFailures  *prometheus.CounterVec
	challenges    prometheus.Counter
	rateLimited   *prometheus.CounterVec
	queueDrops    prometheus.Counter
	registrations prometheus.Gauge
	registers     *prometheus.CounterVec
	calls         *prometheus.CounterVec
	callsActive   prometheus.Gauge
	dropped       prometheus.Counter
	badMessages   prometheus.Counter
	denied        *prometheus.CounterVec
	commit        prometheus.Histogram
	chat          *prometheus.CounterVec

	// Children resolved once for the hot path.
	regOK, regChallenged, regFailed, reqRegister prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_requests_total",
			Help: "SIP requests received, by method."}, []string{"method"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_auth_failures_total",
			Help: "Failed SIP digest authentications, by reason."}, []string{"reason"}),
		challenges: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_sip_challenges_total",
			Help: "SIP digest challenges (401/407) sent."}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_rate_limited_total",
			Help: "SIP requests refused with 503 by the per-source rate limit, by method."}, []string{"method"}),
		queueDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_sip_udp_queue_drops_total",
			Help: "UDP REGISTERs and in-dialog ACKs/BYEs dropped because the workers' queue was full (the client retransmits)."}),
		registrations: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_sip_registrations",
			Help: "Registered SIP contacts."}),
		registers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_registers_total",
			Help: "SIP REGISTER requests answered, by result."}, []string{"result"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_calls_total",
			Help: "SIP calls (INVITEs) proxied, by outcome."}, []string{"result"}),
		callsActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_sip_calls_active",
			Help: "Answered SIP calls not yet ended."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_sip_contacts_dropped_total",
			Help: "Registered contacts dropped because they stopped answering."}),
		badMessages: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_sip_bad_messages_total",
			Help: "SIP requests refused or dropped as malformed."}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_denied_total",
			Help: "SIP requests and connections refused as abuse, by reason."}, []string{"reason"}),
		chat: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_sip_chat_messages_total",
			Help: "Chat lines in SIP MESSAGEs inside conference calls: sent (to a phone, answered 2xx), refused or failed (by the phone), received (from a phone), refused_in (by the session)."},
			[]string{"result"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_sip_register_commit_seconds",
			Help:    "Time to write a batch of changed bindings durably before their REGISTERs are answered.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
	}
	m.regOK, m.regChallenged, m.regFailed = m.registers.WithLabelValues("ok"), m.registers.WithLabelValues("challenged"),
		m.registers.WithLabelValues("failed")
	m.reqRegister = m.requests.WithLabelValues("REGISTER")
	for _, c := range []prometheus.Collector{m.requests, m.authFailures, m.challenges, m.rateLimited, m.queueDrops,
		m.registrations, m.registers, m.calls, m.callsActive, m.dropped, m.badMessages, m.denied, m.commit, m.chat} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
