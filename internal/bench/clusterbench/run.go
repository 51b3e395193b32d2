package clusterbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// Layout places a measurement's members: R sessions of M members (one
// speaker, M−1 listeners) over Nodes nodes. Member k of session r (the
// speaker is k = 0) is on node (r+k) mod Nodes, so each node has the same
// share of every session and of the speakers — the seed's institutions.
// A Hop layout puts every speaker on the first node and the listeners on
// the others, in turn: each delivered packet there crossed a node hop, and
// with three nodes the first sends each packet twice (a copy to each).
// The spread layouts alone cannot tell the cost of a copy sent from that
// of an arrival: on every node of them, copies sent = arrivals −
// delivered/(M−1). The hop layouts break that tie. A Placed layout puts
// every member of session r on node r mod Nodes, as Convene's placement
// does in one institution (a member is sent to the session's owner, a new
// session to the node with room): no packet crosses between nodes.
type Layout struct {
	Name     string
	Sessions int
	Members  int
	Nodes    int
	Hop      bool
	Placed   bool
}

// node returns the node of member k of session r.
func (l Layout) node(r, k int) int {
	if l.Placed {
		return r % l.Nodes
	}
	if l.Hop {
		if k == 0 {
			return 0
		}
		return 1 + (k-1)%(l.Nodes-1)
	}
	return (r + k) % l.Nodes
}

// NodeUse is what one node did in a measurement's window, in packets per
// second and cores (CPU seconds per second).
type NodeUse struct {
	Node      string
	Listeners int
	Speakers  int
	CPU       float64 // cores, the node's idle use taken off
	Delivered float64 // RTP packets sent to endpoints /s
	Ingress   float64 // RTP packets accepted from endpoints /s
	BridgeIn  float64 // packets received from other nodes /s
	BridgeOut float64 // packets sent to other nodes /s
	// EnvelopeBytes is the bridge's bytes per packet sent (the RTP packet
	// and the envelope); WireBytes what the node wrote to its sockets
	// (NATS: subject, framing) per packet sent, 0 when it sent none.
	EnvelopeBytes float64
	WireBytes     float64
	// PerMessage is the packets each media message to another node
	// carried (a batch), 0 when it sent none.
	PerMessage float64
}

// Listeners is what a group of listeners saw: those on their speaker's
// node (Local) or across a node hop (Bridged).
type Listeners struct {
	Count   int
	AvgMs   float64
	MaxMs   float64
	LatePct float64
	LossPct float64
}

// Point is one layout measured.
type Point struct {
	Layout  Layout
	Nodes   []NodeUse
	Local   Listeners
	Bridged Listeners
	// NATS is each nats-server's CPU (cores) over the window: the cost
	// of the cluster's broker network, beside the nodes'.
	NATS []float64
	// Foreign counts packets a listener got of another session: never
	// expected.
	Foreign uint64
}

// Options of a run.
type Options struct {
	Warmup, Window time.Duration
	Log            func(format string, a ...any)
	// Profile, when set, is where each node's CPU profile over the
	// window goes: Profile + "-<layout>-<node>.pprof".
	Profile string
}

// snapshot is one node's counters at an instant.
type snapshot struct {
	at                                    time.Time
	cpu                                   float64
	written                               uint64
	sent, recv, bridgeIn, bridgeOut, bOut float64
	msgsOut                               float64
}

func take(n *convene.Node) snapshot {
	s := snapshot{at: time.Now()}
	_, s.cpu, _ = proc.Process(n.PID())
	s.written, _ = proc.Written(n.PID())
	s.sent, _ = n.Metric("convene_media_packets_sent_total")
	s.recv, _ = n.Metric("convene_media_packets_received_total")
	bp := n.Samples("convene_bridge_packets_total")
	s.bridgeIn, s.bridgeOut = bp[`direction="in"`], bp[`direction="out"`]
	s.bOut = n.Samples("convene_bridge_bytes_total")[`direction="out"`]
	s.msgsOut = n.Samples("convene_bridge_messages_total")[`direction="out"`]
	return s
}

// IdleCPU measures each node's CPU use, in cores, over d with no load:
// heartbeats, lease renewals, the runtime.
func IdleCPU(ctx context.Context, c *Cluster, d time.Duration) []float64 {
	a := make([]snapshot, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = take(n)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	out := make([]float64, len(c.Nodes))
	for i, n := range c.Nodes {
		b := take(n)
		out[i] = (b.cpu - a[i].cpu) / b.at.Sub(a[i].at).Seconds()
	}
	return out
}

// listenerBase is the first listener's address (see loadgen.ListenUDP).
var listenerBase = netip.MustParseAddr("127.79.0.1")

// Measure runs layout l on the cluster: it creates the sessions and links,
// sends the speakers' audio for o.Warmup+o.Window (and a little more, so
// the window's last packets arrive), and takes the nodes' counters over
// the window. idle is each node's idle CPU (IdleCPU).
func Measure(ctx context.Context, c *Cluster, l Layout, idle []float64, o Options) (Point, error) {
	if l.Nodes > len(c.Nodes) || l.Nodes < 1 || (l.Hop && l.Nodes < 2) || l.Members < 2 || l.Sessions < 1 {
		return Point{}, fmt.Errorf("layout %s does not fit %d nodes", l.Name, len(c.Nodes))
	}
	p := Point{Layout: l}
	var listeners []*loadgen.Listener
	var where []int // listener i's node
	for r := range l.Sessions {
		for k := 1; k < l.Members; k++ {
			listeners = append(listeners, &loadgen.Listener{Meeting: r, Kind: loadgen.Audio, Index: k - 1})
			where = append(where, l.node(r, k))
		}
	}
	clock := loadgen.NewClock()
	lis, err := loadgen.ListenUDP(listenerBase, listeners, 2, 16<<20, clock)
	if err != nil {
		return p, err
	}
	defer lis.Close()
	var sessions []string
	var sessionNode []int
	var conns []*net.UDPConn
	defer func() {
		for i, s := range sessions {
			_ = c.Nodes[sessionNode[i]].API("DELETE", "/api/v1/sessions/"+s, nil, nil)
		}
		for _, u := range conns {
			u.Close()
		}
	}()
	var speakers []*loadgen.Speaker
	for r := range l.Sessions {
		home := l.node(r, 0)
		n := c.Nodes[home]
		var s struct{ ID string }
		if err := n.API("POST", "/api/v1/sessions", map[string]string{"name": l.Name + "-" + strconv.Itoa(r)}, &s); err != nil {
			return p, err
		}
		sessions, sessionNode = append(sessions, s.ID), append(sessionNode, home)
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return p, err
		}
		conns = append(conns, conn)
		var link struct {
			Local struct {
				Addr    string `json:"addr"`
				RTPPort int    `json:"rtp_port"`
			} `json:"local"`
		}
		// rtcp_mux: the speaker's socket takes the node's RTCP too.
		if err := n.API("POST", "/api/v1/sessions/"+s.ID+"/rtp-links", map[string]any{"remote": conn.LocalAddr().String(),
			"kind": "audio", "direction": "sendonly", "rtcp_mux": true}, &link); err != nil {
			return p, err
		}
		ip := net.ParseIP(link.Local.Addr)
		if ip == nil || ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
		}
		dst := &net.UDPAddr{IP: ip, Port: link.Local.RTPPort}
		speakers = append(speakers, &loadgen.Speaker{Meeting: r, Stream: loadgen.NewAudio(), SSRC: uint32(r + 1),
			Phase: time.Duration(rand.Int64N(int64(loadgen.AudioInterval))),
			Send:  func(b []byte) error { _, err := conn.WriteToUDP(b, dst); return err }})
	}
	addrs := lis.Addrs()
	if err := parallel(ctx, 8, len(listeners), func(i int) error {
		ln := listeners[i]
		return c.Nodes[where[i]].API("POST", "/api/v1/sessions/"+sessions[ln.Meeting]+"/rtp-links",
			map[string]any{"remote": addrs[i].String(), "kind": "audio", "direction": "recvonly"}, nil)
	}); err != nil {
		return p, err
	}
	lis.Start()
	// The nodes announce which remote tracks they want at once; a moment
	// for the subscriptions to reach every server of the cluster.
	time.Sleep(time.Second)

	tail := 500 * time.Millisecond
	done := make(chan struct{})
	go func() {
		loadgen.RunSpeakers(ctx, clock, speakers, o.Warmup+o.Window+tail)
		close(done)
	}()
	nodes := c.Nodes[:l.Nodes]
	select {
	case <-ctx.Done():
	case <-time.After(o.Warmup):
	}
	before := make([]snapshot, len(nodes))
	for i, n := range nodes {
		before[i] = take(n)
	}
	natsBefore, natsAt := c.natsCPU(), time.Now()
	var profiles sync.WaitGroup
	if o.Profile != "" {
		for i, n := range nodes {
			profiles.Add(1)
			go func() {
				defer profiles.Done()
				n.Profile(int(o.Window.Seconds())-1, fmt.Sprintf("%s-%s-n%d.pprof", o.Profile, strings.ReplaceAll(l.Name, " ", ""), i+1))
			}()
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(o.Window):
	}
	profiles.Wait()
	for i, v := range c.natsCPU() {
		p.NATS = append(p.NATS, (v-natsBefore[i])/time.Since(natsAt).Seconds())
	}
	for i, n := range nodes {
		a, b := before[i], take(n)
		secs := b.at.Sub(a.at).Seconds()
		u := NodeUse{Node: "n" + strconv.Itoa(i+1), CPU: max(0, (b.cpu-a.cpu)/secs-idle[i]),
			Delivered: (b.sent - a.sent) / secs, Ingress: (b.recv - a.recv) / secs,
			BridgeIn: (b.bridgeIn - a.bridgeIn) / secs, BridgeOut: (b.bridgeOut - a.bridgeOut) / secs}
		if out := b.bridgeOut - a.bridgeOut; out > 0 {
			u.EnvelopeBytes = (b.bOut - a.bOut) / out
			u.WireBytes = float64(b.written-a.written) / out
			if m := b.msgsOut - a.msgsOut; m > 0 {
				u.PerMessage = out / m
			}
		}
		for li := range listeners {
			if where[li] == i {
				u.Listeners++
			}
		}
		for r := range l.Sessions {
			if l.node(r, 0) == i {
				u.Speakers++
			}
		}
		p.Nodes = append(p.Nodes, u)
	}
	<-done
	time.Sleep(200 * time.Millisecond) // the last packets in flight
	lis.Close()
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	var local, bridged []*loadgen.Listener
	var localSent, bridgedSent []uint64
	for i, ln := range listeners {
		p.Foreign += ln.Foreign
		sent := speakers[ln.Meeting].Counted
		if where[i] == l.node(ln.Meeting, 0) {
			local, localSent = append(local, ln), append(localSent, sent)
		} else {
			bridged, bridgedSent = append(bridged, ln), append(bridgedSent, sent)
		}
	}
	p.Local, p.Bridged = summarize(local, localSent), summarize(bridged, bridgedSent)
	return p, nil
}

// summarize is what listeners saw, sent[i] being what listener i's
// speaker sent (counted packets).
func summarize(ls []*loadgen.Listener, sent []uint64) Listeners {
	out := Listeners{Count: len(ls)}
	var recv, late, lost, want uint64
	var sum time.Duration
	for i, l := range ls {
		recv += l.Received
		late += l.LateCount
		lost += l.Lost(sent[i])
		want += sent[i]
		sum += l.LatencySum
		out.MaxMs = max(out.MaxMs, float64(l.LatencyMax)/1e6)
	}
	if recv > 0 {
		out.AvgMs = float64(sum) / float64(recv) / 1e6
		out.LatePct = 100 * float64(late) / float64(recv)
	}
	if want > 0 {
		out.LossPct = 100 * float64(lost) / float64(want)
	}
	return out
}

// parallel runs f(0..n-1) on workers goroutines; the first error stops it.
func parallel(ctx context.Context, workers, n int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	next := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n || ctx.Err() != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
