package sfu

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the SFU's Prometheus collectors (Register adds them).
type Metrics struct {
	peers     prometheus.Gauge
	tracks    *prometheus.GaugeVec
	forwarded prometheus.Counter
	dropped   *prometheus.CounterVec
	shed      prometheus.Counter // dropped{reason="shed"}: the node is over capacity
	refused   *prometheus.CounterVec
	placed    prometheus.Counter
	errors    *prometheus.CounterVec
	pli       *prometheus.CounterVec
	nack      *prometheus.CounterVec
	replayed  prometheus.Counter
	switches  prometheus.Counter
	estimate  prometheus.Histogram
	delay     prometheus.Histogram
	batch     []prometheus.Collector // the single-port socket's sendmmsg batches

	channels        prometheus.Gauge // conversation data channels open
	channelsOpened  prometheus.Counter
	channelsRefused *prometheus.CounterVec
}

func newMetrics(b *batchConn) *Metrics {
	m := &Metrics{
		peers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_webrtc_peers",
			Help: "WebRTC peers (a browser, WHIP or WHEP client) now."}),
		tracks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convene_webrtc_tracks",
			Help: "Tracks WebRTC peers publish now."}, []string{"dir"}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_webrtc_forwarded_packets_total",
			Help: "RTP packets sent to WebRTC subscribers."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_dropped_packets_total",
			Help: "RTP packets not sent to a WebRTC subscriber, by reason."}, []string{"reason"}),
		placed: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_webrtc_placed_total",
			Help: "Browser members sent to meet on another node of the cluster (the session's, near and with room)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_refused_total",
			Help: "Peers refused or hung up by a cap, by reason."}, []string{"reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_signalling_errors_total",
			Help: "Signalling frames refused, by error code."}, []string{"code"}),
		pli: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_keyframe_requests_total",
			Help: "Keyframe requests: received from subscribers, sent to publishers, throttled."}, []string{"what"}),
		nack: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_nack_packets_total",
			Help: "Packets subscribers asked for again: resent from the history, or missing from it."}, []string{"what"}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_webrtc_replayed_packets_total",
			Help: "Video packets sent to subscribers whose connection just came up, from the newest keyframe in the history."}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_webrtc_layer_switches_total",
			Help: "Simulcast layer switches made for subscribers."}),
		estimate: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_webrtc_bandwidth_estimate_bps",
			Help:    "Subscribers' bandwidth estimates, sampled every tick.",
			Buckets: prometheus.ExponentialBuckets(50_000, 2, 10)}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convene_webrtc_forward_delay_seconds",
			Help:    "Time from a packet's arrival at a subscriber's queue to its send (the node's own share of latency).",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5}}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_webrtc_data_channels",
			Help: "Conversation data channels open now (a browser member's chat and whiteboard over WebRTC)."}),
		channelsOpened: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_webrtc_data_channels_opened_total",
			Help: "Conversation data channels the node took."}),
		channelsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_webrtc_data_channels_refused_total",
			Help: "Data channels the node closed at once, by reason: label (not \"conversation\"), second (one is open), unreliable, not_browser (WHIP, WHEP), attach (the conversation refused the member), off (no conversations on this node)."}, []string{"reason"}),
	}
	for _, r := range []string{"label", "second", "unreliable", "not_browser", "attach", "off"} {
		m.channelsRefused.WithLabelValues(r)
	}
	m.shed = m.dropped.WithLabelValues("shed")
	if b != nil {
		load := func(a *atomic.Uint64) func() float64 { return func() float64 { return float64(a.Load()) } }
		m.batch = []prometheus.Collector{
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_send_batches_total",
				Help: "sendmmsg calls on the single UDP port; datagrams / batches is the mean batch."}, load(&b.batches)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_send_batched_datagrams_total",
				Help: "Datagrams sent in sendmmsg batches on the single UDP port."}, load(&b.datagrams)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_send_batch_errors_total",
				Help: "Datagrams of a batch the kernel refused (lost)."}, load(&b.failed)),
		}
		for kind, n := range map[string]*atomic.Uint64{"audio": &b.directAudio, "video": &b.directVideo} {
			m.batch = append(m.batch, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_direct_packets_total",
				Help:        "Packets to subscribers the node encrypted and sent itself, past pion's SRTP, mux and ICE writers (the direct path).",
				ConstLabels: prometheus.Labels{"kind": kind}}, load(n)))
		}
		if b.in != nil {
			for kind, n := range map[string]*atomic.Uint64{"audio": &b.in.audio, "video": &b.in.video} {
				m.batch = append(m.batch, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_direct_in_packets_total",
					Help:        "Packets from publishers the node decrypted and published itself as the single UDP port read them, past pion's receive chain (the direct path).",
					ConstLabels: prometheus.Labels{"kind": kind}}, load(n)))
			}
			m.batch = append(m.batch,
				prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "convene_webrtc_direct_in_refused_total",
					Help: "Packets on the direct path from publishers that SRTP refused (replayed, malformed) and the node dropped."}, load(&b.in.refused)))
		}
	}
	return m
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.peers, m.tracks, m.forwarded, m.dropped, m.refused, m.placed, m.errors, m.pli, m.nack, m.replayed, m.switches, m.estimate, m.delay,
		m.channels, m.channelsOpened, m.channelsRefused)
	r.MustRegister(m.batch...)
}

// ForwardDelay returns the forward delay histogram
// (convene_webrtc_forward_delay_seconds): its bounds in seconds and the
// packets within each (not cumulative), with one more count past the last
// bound; nil when it cannot be read. The node's capacity governor takes
// it with the plain RTP sockets' queueing.
func (s *SFU) ForwardDelay() (bounds []float64, counts []uint64) {
	var m dto.Metric
	if err := s.m.delay.Write(&m); err != nil || m.Histogram == nil {
		return nil, nil
	}
	var below uint64
	for _, b := range m.Histogram.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, b.GetCumulativeCount()-below)
		below = b.GetCumulativeCount()
	}
	return bounds, append(counts, m.Histogram.GetSampleCount()-below)
}
