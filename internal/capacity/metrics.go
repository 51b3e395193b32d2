package capacity

import "github.com/prometheus/client_golang/prometheus"

// Collector exports a Governor's figures when /metrics is scraped:
//
//	convene_node_capacity_pps                 delivery capacity, packets/s sent (measured or configured)
//	convene_node_load_pps                     packets/s sent now (smoothed)
//	convene_node_committed_pps                predicted packets/s of what is admitted (counts before the load shows it)
//	convene_node_admit_pps                    the load up to which joins are admitted (capacity × (1 − headroom))
//	convene_node_cost_seconds_per_packet      measured CPU time per packet sent (0 if configured)
//	convene_shed_level                        0 normal, 1 lowest simulcast layer, 2 speakers' video only, 3 no video
//	convene_admission_refused_total{what}     joins, WHIP, WHEP, links and mixers refused over capacity
type Collector struct {
	g                                                     *Governor
	capacity, load, committed, admit, cost, shed, refused *prometheus.Desc
}

// NewCollector returns g's metrics.
func NewCollector(g *Governor) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{g: g,
		capacity:  d("convene_node_capacity_pps", "The node's delivery capacity in packets/s sent (measured, or capacity.pps)."),
		load:      d("convene_node_load_pps", "Packets/s the node sends now (smoothed)."),
		committed: d("convene_node_committed_pps", "Predicted packets/s of the joins, links and mixers admitted; admission goes by it when it is more than the load."),
		admit:     d("convene_node_admit_pps", "The load up to which new joins, links and mixers are admitted: capacity × (1 − headroom)."),
		cost:      d("convene_node_cost_seconds_per_packet", "Measured process CPU time per packet sent (0 when the capacity is configured)."),
		shed:      d("convene_shed_level", "Load shedding: 0 none, 1 simulcast at the lowest layer, 2 only active speakers' video, 3 no video."),
		refused:   d("convene_admission_refused_total", "Joins, WHIP and WHEP clients, links and mixers refused because the node is over capacity.", "what"),
	}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.capacity, c.load, c.committed, c.admit, c.cost, c.shed, c.refused} {
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.Status()
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	gauge(c.capacity, st.CapacityPPS)
	gauge(c.load, st.LoadPPS)
	gauge(c.committed, st.CommittedPPS)
	gauge(c.admit, st.AdmitPPS)
	gauge(c.cost, st.CostNS/1e9)
	gauge(c.shed, float64(st.ShedLevel))
	for _, w := range []string{"join", "whip", "whep", "link", "mixer"} {
		if _, ok := st.Refused[w]; !ok {
			st.Refused[w] = 0 // shown from the start
		}
	}
	for w, n := range st.Refused {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), w)
	}
}
