package peerdelay

import (
	"context"
	"log/slog"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/bus"
)

// window is how many of the last probes Loss counts.
const window = 16

// Options configure a Pinger.
type Options struct {
	Conn *nats.Conn
	// Self is this node's ID (a subject token); it is never probed.
	Self string
	// Peers returns the nodes to probe (the registry's, not stopped).
	Peers func() []string
	// Interval between rounds (default 2 s); Timeout for one reply
	// (default and at most Interval/2).
	Interval, Timeout time.Duration
	// Now is the clock probes are timed with (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Pinger probes the cluster's nodes and keeps their delays.
type Pinger struct {
	o Options

	mu    sync.Mutex
	peers map[string]*peer
	// probes counts replies and timeouts since start (metrics).
	replies, timeouts uint64
}

// peer is one node's measurements.
type peer struct {
	srtt time.Duration // 0 until the first reply
	last time.Duration
	lost uint16 // bit i set: probe i back (0 newest) got no reply
	sent int    // probes sent, up to window
}

// New returns a Pinger; Run starts it.
func New(o Options) *Pinger {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Timeout <= 0 || o.Timeout > o.Interval/2 {
		o.Timeout = o.Interval / 2
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pinger{o: o, peers: map[string]*peer{}}
}

// Respond answers requests on this node's ping subject with an empty
// reply until stop is called. The request's payload is ignored, so a
// request costs one small reply whatever it carries.
func Respond(nc *nats.Conn, self string) (stop func(), err error) {
	subject, err := bus.PingSubject(self)
	if err != nil {
		return nil, err
	}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if m.Reply != "" {
			m.Respond(nil) //nolint:errcheck // a lost reply is a lost probe, counted by the prober
		}
	})
	if err != nil {
		return nil, err
	}
	// The server has the subscription once Flush returns: a probe sent
	// after Respond is answered (routes to other servers follow shortly).
	if err := nc.Flush(); err != nil {
		sub.Unsubscribe() //nolint:errcheck // returning the flush's error
		return nil, err
	}
	return func() { sub.Unsubscribe() }, nil //nolint:errcheck // closed connections drop subscriptions anyway
}

// Run probes every Interval until ctx is done.
func (p *Pinger) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	for {
		p.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round probes every peer once, waits for their replies or timeouts, and
// forgets the peers no longer listed.
func (p *Pinger) Round(ctx context.Context) {
	ids := p.o.Peers()
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id != p.o.Self {
			listed[id] = true
		}
	}
	p.mu.Lock()
	for id := range p.peers {
		if !listed[id] {
			delete(p.peers, id)
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for id := range listed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rtt, ok := p.probe(ctx, id)
			p.observe(id, rtt, ok)
		}()
	}
	wg.Wait()
}

func (p *Pinger) probe(ctx context.Context, id string) (time.Duration, bool) {
	subject, err := bus.PingSubject(id)
	if err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	start := p.o.Now()
	if _, err := p.o.Conn.RequestWithContext(ctx, subject, nil); err != nil {
		return 0, false
	}
	return p.o.Now().Sub(start), true
}

// observe takes one probe's outcome: its round trip when answered.
func (p *Pinger) observe(id string, rtt time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.peers[id]
	if pr == nil {
		pr = &peer{}
		p.peers[id] = pr
	}
	pr.lost <<= 1
	if pr.sent < window {
		pr.sent++
	}
	if !ok {
		pr.lost |= 1
		p.timeouts++
		return
	}
	p.replies++
	if rtt <= 0 {
		rtt = time.Nanosecond // a reply came: never "no measurement"
	}
	pr.last = rtt
	if pr.srtt == 0 {
		pr.srtt = rtt
	} else {
		pr.srtt += (rtt - pr.srtt) / 8
	}
}

// Peers returns the table, by node ID.
func (p *Pinger) Peers() []bus.PeerRTT {
	p.mu.Lock()
	out := make([]bus.PeerRTT, 0, len(p.peers))
	for id, pr := range p.peers {
		loss := 0.0
		if pr.sent > 0 {
			loss = float64(bits.OnesCount16(pr.lost)) / float64(pr.sent)
		}
		out = append(out, bus.PeerRTT{Node: id, RTTSeconds: pr.srtt.Seconds(), Loss: loss})
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// counts returns the replies and timeouts so far.
func (p *Pinger) counts() (replies, timeouts uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replies, p.timeouts
}
