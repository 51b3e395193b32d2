package registry

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes the registry when /metrics is scraped, from what the
// nodes' last heartbeats said. Metrics:
//
//	convene_registry_nodes{state}                        nodes listed: up, draining, stopped, stale
//	convene_registry_node_stale{node}                    1 when no heartbeat for 5 s
//	convene_registry_node_heartbeat_age_seconds{node}    since its last heartbeat arrived
//	convene_registry_node_packets_per_second{node,direction}  in, out
//	convene_registry_node_cpu_cores{node}                CPU time per second
//	convene_registry_node_sessions{node}                 sessions with media on it
//	convene_registry_node_links{node}                    media links attached to it
//	convene_registry_node_capacity_packets_per_second{node}  configured; 0 is unknown
//
// A node's series go when the registry forgets it (5 min stale).
type Collector struct {
	r *Registry

	nodes, stale, age, pps, cpu, sessions, links, capacity *prometheus.Desc
}

// Collector returns the registry's metrics, for a prometheus.Registry.
func (r *Registry) Collector() *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{r: r,
		nodes:    d("convene_registry_nodes", "Nodes in the registry, by state (up, draining, stopped, stale).", "state"),
		stale:    d("convene_registry_node_stale", "1 when the node's heartbeats stopped (none for 5 s).", "node"),
		age:      d("convene_registry_node_heartbeat_age_seconds", "Seconds since the node's last heartbeat arrived.", "node"),
		pps:      d("convene_registry_node_packets_per_second", "RTP packets per second the node received (in) and sent (out), from its heartbeat.", "node", "direction"),
		cpu:      d("convene_registry_node_cpu_cores", "CPU time per second of the node's process, from its heartbeat.", "node"),
		sessions: d("convene_registry_node_sessions", "Sessions with media on the node, from its heartbeat.", "node"),
		links:    d("convene_registry_node_links", "Media links attached to the node, from its heartbeat.", "node"),
		capacity: d("convene_registry_node_capacity_packets_per_second", "Packets per second the node can deliver, as configured (capacity_pps); 0 is unknown.", "node"),
	}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodes, c.stale, c.age, c.pps, c.cpu, c.sessions, c.links, c.capacity} {
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	states := map[string]float64{StateUp: 0, StateDraining: 0, StateStopped: 0, "stale": 0}
	for _, n := range c.r.Nodes() {
		st := n.State
		if n.Stale {
			st = "stale"
		}
		states[st]++
		stale := 0.0
		if n.Stale {
			stale = 1
		}
		hb := n.Heartbeat
		gauge(c.stale, stale, n.ID)
		gauge(c.age, n.AgeSeconds, n.ID)
		gauge(c.pps, hb.PacketsInPerSecond, n.ID, "in")
		gauge(c.pps, hb.PacketsOutPerSecond, n.ID, "out")
		gauge(c.cpu, hb.CPUCores, n.ID)
		gauge(c.sessions, float64(hb.Sessions), n.ID)
		gauge(c.links, float64(hb.Links), n.ID)
		gauge(c.capacity, hb.CapacityPPS, n.ID)
	}
	for st, v := range states {
		gauge(c.nodes, v, st)
	}
}
