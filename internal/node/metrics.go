package node

import (
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/udpmux"
	"github.com/prometheus/client_golang/prometheus"
)

// mediaCollector reads the media counters when /metrics is scraped, so the
// hot path only bumps its own atomics. Metrics:
//
//	convene_sessions_active                        sessions with their media running
//	convene_media_links                            links attached
//	convene_media_tracks                           tracks published
//	convene_media_packets_received_total           RTP packets accepted from endpoints
//	convene_media_bytes_received_total
//	convene_media_packets_sent_total               RTP packets sent to endpoints
//	convene_media_bytes_sent_total
//	convene_media_dropped_packets_total{reason}    truncated, bad_version, direction, queue_full,
//	                                               loop, oversize, unknown_source, read_error,
//	                                               socket_full (the kernel's, at a full receive buffer)
//	                                               floor (sent without holding the floor)
//	                                               consent (a member's link whose remote has not sent)
//	convene_udp_send_batches_total{socket}         sendmmsg calls (rtp, rtcp)
//	convene_links_refused_total                    links refused by the destination policy or a cap
//	convene_media_latched_total{socket}            sources learnt by latching (phones behind NAT)
//	convene_media_forward_delay_seconds            a send's wait in the writers' queues (by its oldest packet, to the batch's end)
//	convene_media_receive_delay_seconds            a datagram's wait in the socket's receive queue for the reader
type mediaCollector struct {
	svc   *session.Service
	socks rtplink.Sockets

	sessions, links, tracks, pIn, bIn, pOut, bOut, dropped, batches, refused, latched, delay, readDelay *prometheus.Desc
}

func newMediaCollector(svc *session.Service, socks rtplink.Sockets) *mediaCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &mediaCollector{svc: svc, socks: socks,
		sessions: d("convene_sessions_active", "Sessions whose media runs on this node."),
		links:    d("convene_media_links", "Media links attached."),
		tracks:   d("convene_media_tracks", "Tracks published."),
		pIn:      d("convene_media_packets_received_total", "RTP packets accepted from endpoints."),
		bIn:      d("convene_media_bytes_received_total", "Bytes of RTP accepted from endpoints."),
		pOut:     d("convene_media_packets_sent_total", "RTP packets sent to endpoints."),
		bOut:     d("convene_media_bytes_sent_total", "Bytes of RTP sent to endpoints."),
		dropped:  d("convene_media_dropped_packets_total", "Media packets dropped, by reason.", "reason"),
		batches:  d("convene_udp_send_batches_total", "sendmmsg calls, by socket.", "socket"),
		refused:  d("convene_links_refused_total", "Links refused by the destination policy or a cap."),
		latched:  d("convene_media_latched_total", "Sources learnt by latching: endpoints behind NAT (dialled-in phones) whose media came from their signalling IP, not their SDP's address.", "socket"),
		delay: d("convene_media_forward_delay_seconds", "Time a batch of plain RTP sends (up to 256 datagrams) took from its oldest packet's queueing in the writers' queues "+
			"until its last datagram was handed to the kernel: the node's own share of a plain RTP listener's latency, an upper bound for the packets sent with it."),
		readDelay: d("convene_media_receive_delay_seconds", "Time a datagram on the RTP socket waited in the kernel's receive queue until the node read it "+
			"(the kernel's arrival stamp to the read): a node the machine does not schedule in time makes every packet wait here, and past the buffer the kernel drops them (reason socket_full)."),
	}
}

func (c *mediaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.links, c.tracks, c.pIn, c.bIn, c.pOut, c.bOut, c.dropped, c.batches, c.refused, c.latched, c.delay, c.readDelay} {
		ch <- d
	}
}

func (c *mediaCollector) Collect(ch chan<- prometheus.Metric) {
	ld := c.svc.Load()
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(c.sessions, float64(ld.Sessions))
	gauge(c.links, float64(ld.Links))
	gauge(c.tracks, float64(ld.Tracks))
	counter(c.pIn, ld.PacketsIn)
	counter(c.bIn, ld.BytesIn)
	counter(c.pOut, ld.PacketsOut)
	counter(c.bOut, ld.BytesOut)
	rtp, rtcp := c.socks.RTP.Stats(), c.socks.RTCP.Stats()
	drops := map[string]uint64{}
	for _, r := range []string{"truncated", "bad_version", "direction", "queue_full", "loop"} {
		drops[r] = ld.Dropped[r]
	}
	for r, v := range ld.Dropped {
		drops[r] = v
	}
	drops["unknown_source"] = rtp.UnknownSource + rtcp.UnknownSource
	drops["oversize"] += rtp.Oversize + rtcp.Oversize
	drops["read_error"] = rtp.ReadErrors + rtcp.ReadErrors
	drops["socket_full"] = rtp.SocketDrops + rtcp.SocketDrops
	for r, v := range drops {
		counter(c.dropped, v, r)
	}
	counter(c.batches, rtp.SendBatches, "rtp")
	counter(c.batches, rtcp.SendBatches, "rtcp")
	counter(c.refused, c.svc.RefusedLinks())
	counter(c.latched, rtp.Latched, "rtp")
	counter(c.latched, rtcp.Latched, "rtcp")
	delayHistogram(ch, c.delay, rtp.Delay)
	delayHistogram(ch, c.readDelay, rtp.ReadDelay)
}

// delayHistogram sends one of udpmux's delay histograms as d.
func delayHistogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h udpmux.Delay) {
	if len(h.Counts) <= len(udpmux.DelayBuckets) {
		return
	}
	var n uint64
	buckets := make(map[float64]uint64, len(udpmux.DelayBuckets))
	for i, ub := range udpmux.DelayBuckets {
		n += h.Counts[i]
		buckets[ub] = n
	}
	n += h.Counts[len(udpmux.DelayBuckets)]
	ch <- prometheus.MustNewConstHistogram(d, n, h.Sum.Seconds(), buckets)
}
