package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/udpmux"
)

// The self-probe: one stream fanned out to probeSinks loopback sockets
// for probeFor through a udpmux socket like the media one.
const (
	probeSinks  = 16
	probeFor    = 200 * time.Millisecond
	probePacket = 200 // bytes: a voice packet and its RTP header
	probeWindow = 64  // packets in flight per sink
	// sampleEvery is how often the governor reads the counters.
	sampleEvery = 500 * time.Millisecond
)

// newGovernor makes the node's capacity governor: capacity.pps, or the
// self-probe's figure corrected by the running cost. The counters it
// reads are the session service's, set later by Start.
func (n *Node) newGovernor() *capacity.Governor {
	c := n.cfg.Capacity
	var taken atomic.Uint64 // the packets taken from endpoints, as Sent last read them
	o := capacity.Options{PPS: c.PPS, Headroom: c.Headroom, Logger: n.log.With("component", "capacity"),
		CPU: bus.ProcessCPUSeconds,
		// The load is what the node was asked to send: a packet a full
		// queue dropped counts, or a node short of CPU (a noisy
		// neighbour) would look less loaded the more it drops.
		Sent: func() uint64 {
			if n.sessions == nil {
				return 0
			}
			in, out, queueFull := n.sessions.Counts()
			taken.Store(in) // for Received, read right after
			return out + queueFull
		},
		// What the node takes from its endpoints costs it as sending does:
		// both are its load (capacity.Options.Received).
		Received: taken.Load,
		Predicted: func() float64 {
			if n.sessions == nil {
				return 0
			}
			return n.sessions.Predicted()
		},
		Delay:  n.queueDelay(),
		OnShed: n.shedChanged, Alternatives: n.alternatives}
	if _, err := machineBusySeconds(); err == nil {
		o.Machine = func() float64 {
			if s, err := machineBusySeconds(); err == nil {
				return s
			}
			return -1 // this sample does not count
		}
	}
	if c.PPS == 0 {
		pps, err := probeCapacity(udpmux.Options{Batch: n.cfg.RTP.Batch, Writers: n.cfg.RTP.Writers}, n.cfg.RTP.Addr)
		if err != nil {
			n.log.Warn("capacity probe failed; measuring as the node runs", "err", err)
		}
		o.ProbePPS = pps
	}
	g := capacity.New(o)
	st := g.Status()
	n.log.Info("capacity", "pps", int(st.CapacityPPS), "measured", st.Measured, "headroom", c.Headroom)
	return g
}

// minFlushes is the fewest sends (or datagrams read) over a sample whose
// queueing delay counts: a few are one pause, not a measure.
const minFlushes = 50

// readerBar is the reader's wait (p99) past which it counts in the
// governor's queueing signal. Below it, it says little about the node's
// own work: a trace of a node on a busy machine had its reader waiting
// 10–30 ms for the Go scheduler with a few hundred listeners as with
// thousands, while the writers' queues (which grow with the listeners)
// stayed short.
const readerBar = 0.05

// queueDelay returns the governor's Delay: the node's own queueing over
// the last sample, the longest of the RTP socket's writers' (a send's wait
// in their queues, udpmux.Stats.Delay), the SFU's (a packet's wait in a
// subscriber's queue, sfu.ForwardDelay) and, past readerBar, its reader's
// (a datagram's wait in the socket's receive queue, Stats.ReadDelay), each
// as the 99th percentile's bucket bound (a second past the last) and -1
// over fewer than minFlushes. Datagrams the kernel dropped at the socket
// since the last sample (Stats.SocketDrops: the reader fell that far
// behind) count as a second: packets lost.
func (n *Node) queueDelay() func() float64 {
	var lastW, lastR, lastS []uint64
	var lastDrops uint64
	return func() float64 {
		d := -1.0
		if n.rtc != nil {
			if bounds, counts := n.rtc.ForwardDelay(); counts != nil {
				d = p99Since(&lastS, counts, bounds)
			}
		}
		if n.socks.RTP == nil {
			return d
		}
		st := n.socks.RTP.Stats()
		d = max(d, p99Since(&lastW, st.Delay.Counts, udpmux.DelayBuckets))
		if r := p99Since(&lastR, st.ReadDelay.Counts, udpmux.DelayBuckets); r > readerBar {
			d = max(d, r)
		}
		if st.SocketDrops > lastDrops {
			d = 1
		}
		lastDrops = st.SocketDrops
		return d
	}
}

// p99Since is the 99th percentile's bucket bound of a delay histogram's
// counts (by bounds, one more past the last) since *last, which it
// updates; a second past the last bound, -1 over fewer than minFlushes.
func p99Since(last *[]uint64, now []uint64, bounds []float64) float64 {
	d := make([]uint64, len(now))
	var total uint64
	for i := range now {
		d[i] = now[i]
		if i < len(*last) {
			d[i] -= min(d[i], (*last)[i])
		}
		total += d[i]
	}
	*last = now
	if total < minFlushes {
		return -1
	}
	var seen uint64
	for i, k := range d {
		seen += k
		if float64(seen) >= 0.99*float64(total) {
			if i < len(bounds) {
				return bounds[i]
			}
			break
		}
	}
	return 1
}

// shedChanged puts a shed step on every live session's events, and has
// the SFU ask for keyframes of the video it lets through again.
func (n *Node) shedChanged(ch capacity.Change) {
	n.sessions.AnnounceAll(event.LoadShed, map[string]any{"level": int(ch.To), "shed": ch.To.String(),
		"from": ch.From.String(), "message": ch.To.Describe(), "load_pps": int(ch.LoadPPS), "capacity_pps": int(ch.CapacityPPS)})
	if n.rtc != nil {
		n.rtc.Restored(ch.From, ch.To)
	}
}

// runGovernor samples the counters until the node stops.
func (n *Node) runGovernor() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.govStop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		n.gov.Run(ctx, sampleEvery)
	}()
}

// probeCapacity measures what sending costs: the process CPU time per
// packet sent while one stream is fanned out to loopback sinks through a
// udpmux socket (its writers, queues and send calls), the CPU the node
// may use divided by it. The sinks are never read: a receiver's cost is
// another machine's.
func probeCapacity(o udpmux.Options, addr string) (float64, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.IsUnspecified() || !ip.Is4() {
		ip = netip.MustParseAddr("127.0.0.1")
	}
	sock, err := udpmux.Listen(netip.AddrPortFrom(ip, 0).String(), o)
	if err != nil {
		return 0, fmt.Errorf("probe socket: %w", err)
	}
	defer sock.Close()
	var dests []*udpmux.Dest
	for range probeSinks {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
		if err != nil {
			return 0, fmt.Errorf("probe sink: %w", err)
		}
		defer c.Close()
		dests = append(dests, udpmux.NewDest(c.LocalAddr().(*net.UDPAddr).AddrPort(), probeWindow))
	}
	// done counts packets out of the queues (sent, dropped, failed).
	sent := func() (n, done uint64) {
		for _, d := range dests {
			st := d.Stats()
			n += st.Packets
			done += st.Packets + st.Drops + st.Errors
		}
		return n, done
	}
	inFlight := func(pushed uint64) uint64 {
		_, done := sent()
		return pushed - done
	}
	cpu0, start := bus.ProcessCPUSeconds(), time.Now()
	var pushed uint64
	for seq := uint16(0); time.Since(start) < probeFor; seq++ {
		for inFlight(pushed) > probeSinks*probeWindow/2 {
			time.Sleep(50 * time.Microsecond)
		}
		p := media.NewPacket()
		b := p.Buffer()[:probePacket]
		clear(b)
		b[0], b[1], b[2], b[3] = 0x80, 0, byte(seq>>8), byte(seq)
		p.SetLen(probePacket)
		p.Kind = media.Audio
		p.Retain(len(dests) - 1)
		for _, d := range dests {
			sock.Send(p, d)
		}
		pushed += uint64(len(dests))
	}
	for i := 0; i < 100 && inFlight(pushed) > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	n, _ := sent()
	cpu := bus.ProcessCPUSeconds() - cpu0
	if n == 0 || cpu <= 0 {
		return 0, fmt.Errorf("probe sent %d packets in %.3f s of CPU", n, cpu)
	}
	return float64(runtime.GOMAXPROCS(0)) * float64(n) / cpu, nil
}
