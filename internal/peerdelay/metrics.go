package peerdelay

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes the Pinger's table when /metrics is scraped:
//
//	convene_cluster_peer_rtt_seconds{peer}   smoothed round trip over NATS; 0 before a reply
//	convene_cluster_peer_loss_ratio{peer}    share of the last 16 probes unanswered
//	convene_cluster_peer_probes_total{result}  replies and timeouts (no peer label)
//
// One series per node the registry lists: bounded by the cluster's size,
// and a node's series go when the registry forgets it.
type Collector struct {
	p              *Pinger
	rtt, loss, tot *prometheus.Desc
}

// Collector returns the Pinger's metrics, for a prometheus.Registry.
func (p *Pinger) Collector() *Collector {
	return &Collector{p: p,
		rtt:  prometheus.NewDesc("convene_cluster_peer_rtt_seconds", "Smoothed round-trip time to the peer node over NATS (RFC 6298 SRTT); 0 before its first reply.", []string{"peer"}, nil),
		loss: prometheus.NewDesc("convene_cluster_peer_loss_ratio", "Share of the last 16 delay probes to the peer node that got no reply.", []string{"peer"}, nil),
		tot:  prometheus.NewDesc("convene_cluster_peer_probes_total", "Delay probes to other nodes, by result (reply, timeout).", []string{"result"}, nil),
	}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.rtt; ch <- c.loss; ch <- c.tot }

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, pr := range c.p.Peers() {
		ch <- prometheus.MustNewConstMetric(c.rtt, prometheus.GaugeValue, pr.RTTSeconds, pr.Node)
		ch <- prometheus.MustNewConstMetric(c.loss, prometheus.GaugeValue, pr.Loss, pr.Node)
	}
	r, t := c.p.counts()
	ch <- prometheus.MustNewConstMetric(c.tot, prometheus.CounterValue, float64(r), "reply")
	ch <- prometheus.MustNewConstMetric(c.tot, prometheus.CounterValue, float64(t), "timeout")
}
