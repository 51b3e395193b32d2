package relay

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons, the label values of convene_relay_drops_total.
const (
	dropNotRTP    = iota // version is not 2: not RTP/RTCP (e.g. STUN, garbage)
	dropTruncated        // shorter than its RTP/RTCP headers say
	dropOversize         // larger than the relay's buffer
	dropSource           // not from the address the side latched onto, nor one that may take over
	dropRefused          // the side had not latched and may not latch onto this source (latch.go)
	dropNoPeer           // the other side's address is not known yet
	dropSend             // the kernel refused the send (buffer full, error)
	dropReadError        // recvmmsg failed
	numDrops
)

var dropNames = [numDrops]string{"not_rtp", "truncated", "oversize", "source", "refused_source", "no_peer", "send", "read_error"}

// counters are shared tallies, added to once per batch.
type counters struct {
	in, inBytes, out, outBytes atomic.Uint64
	drops                      [numDrops]atomic.Uint64

	calls, timeouts, busyPorts atomic.Uint64
	limited                    [numCaps]atomic.Uint64 // offers refused, by cap
}

// Stats is a snapshot of the relay's counters.
type Stats struct {
	PacketsIn, BytesIn   uint64 // datagrams relayed in: read on relay sockets or forwarded by the kernel
	PacketsOut, BytesOut uint64 // datagrams sent, by the workers or the kernel
	// Kernel says whether the kernel fast path is on; KernelPackets and
	// KernelBytes (UDP payload) are the part of the totals it forwarded, as
	// of the last poll (every sweep tick, and when a flow leaves).
	Kernel                     bool
	KernelPackets, KernelBytes uint64
	KernelFlows                int // flows in the kernel now
	Drops                      map[string]uint64
	ActiveCalls                int
	CallsTotal                 uint64 // calls created
	Timeouts                   uint64 // calls ended by the media timeout
	FreePorts                  int    // free RTP/RTCP port pairs
	// Refused counts offers refused by a stream cap, by cap ("call",
	// "user", "source").
	Refused map[string]uint64
}

// Dropped returns the sum of all drops.
func (s Stats) Dropped() uint64 {
	var n uint64
	for _, v := range s.Drops {
		n += v
	}
	return n
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	s := Stats{Drops: map[string]uint64{}, ActiveCalls: r.Calls(), CallsTotal: r.st.calls.Load(),
		Timeouts: r.st.timeouts.Load(), Refused: map[string]uint64{}}
	for i, name := range capNames {
		s.Refused[name] = r.st.limited[i].Load()
	}
	for _, w := range r.ws {
		s.PacketsIn += w.c.in.Load()
		s.BytesIn += w.c.inBytes.Load()
		s.PacketsOut += w.c.out.Load()
		s.BytesOut += w.c.outBytes.Load()
		for i := range w.c.drops {
			s.Drops[dropNames[i]] += w.c.drops[i].Load()
		}
	}
	if r.k != nil {
		s.Kernel = true
		s.KernelPackets, s.KernelBytes = r.k.packets.Load(), r.k.bytes.Load()
		s.KernelFlows = r.kflowCount()
		s.PacketsIn += s.KernelPackets
		s.PacketsOut += s.KernelPackets
		s.BytesIn += s.KernelBytes
		s.BytesOut += s.KernelBytes
	}
	r.poolMu.Lock()
	s.FreePorts = r.ports.available()
	r.poolMu.Unlock()
	return s
}

// collector exports Stats as Prometheus metrics:
//
//	convene_relay_packets_total{direction="in|out"}  datagrams read / sent
//	convene_relay_bytes_total{direction="in|out"}    their UDP payload bytes
//	convene_relay_drops_total{reason}                datagrams not relayed, by reason
//	convene_relay_calls_active                       calls with ports allocated
//	convene_relay_calls_total                        calls created
//	convene_relay_timeouts_total                     calls ended by the media timeout
//	convene_relay_free_port_pairs                    port pairs left in the range
//	convene_relay_kernel_packets_total               the part of packets_total the kernel forwarded
//	convene_relay_kernel_flows                       flows the kernel forwards now
//	convene_relay_limit_refusals_total{cap}          offers refused by a stream cap (call, user, source)
//
// Sources the relay refused to latch onto are drops_total{reason="refused_source"}
// (the side had not latched) and {reason="source"} (it had, to another).
type collector struct {
	r                                                    *Relay
	packets, bytes, drops, active, calls, timeouts, free *prometheus.Desc
	kpackets, kflows, refused                            *prometheus.Desc
}

func newCollector(r *Relay) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("convene_relay_"+name, help, labels, nil)
	}
	return &collector{r: r,
		packets:  d("packets_total", "Datagrams read (in) and sent (out) by the RTP relay.", "direction"),
		bytes:    d("bytes_total", "UDP payload bytes read (in) and sent (out) by the RTP relay.", "direction"),
		drops:    d("drops_total", "Datagrams the RTP relay did not forward, by reason.", "reason"),
		active:   d("calls_active", "Calls with relay ports allocated."),
		calls:    d("calls_total", "Calls created on the RTP relay."),
		timeouts: d("timeouts_total", "Calls ended because no media flowed for the timeout."),
		free:     d("free_port_pairs", "RTP/RTCP port pairs left in the relay's range."),
		kpackets: d("kernel_packets_total", "Datagrams the kernel fast path forwarded (included in packets_total)."),
		kflows:   d("kernel_flows", "Flows the kernel fast path forwards now."),
		refused:  d("limit_refusals_total", "Offers the RTP relay refused because a stream cap was reached, by cap.", "cap"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.packets, c.bytes, c.drops, c.active, c.calls, c.timeouts, c.free, c.kpackets, c.kflows, c.refused} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(s.PacketsIn), "in")
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(s.PacketsOut), "out")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.BytesIn), "in")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.BytesOut), "out")
	for _, name := range dropNames {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(s.Drops[name]), name)
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(s.ActiveCalls))
	ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(s.CallsTotal))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(s.FreePorts))
	ch <- prometheus.MustNewConstMetric(c.kpackets, prometheus.CounterValue, float64(s.KernelPackets))
	ch <- prometheus.MustNewConstMetric(c.kflows, prometheus.GaugeValue, float64(s.KernelFlows))
	for _, name := range capNames {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused[name]), name)
	}
}
