package brokerbench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/nats-io/nats.go"
)

// NATSPeer is a nats-server process (Debian's package) used as the peer
// broker: one subject per meeting, the speaker publishes, every listener is
// its own client connection subscribed to the subject.
type NATSPeer struct {
	cmd *exec.Cmd
	url string
}

// StartNATS runs nats-server on a random loopback port.
func StartNATS(pin bool) (*NATSPeer, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, fmt.Errorf("nats-server is not installed (apt-get install nats-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &NATSPeer{cmd: exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port)), url: "nats://127.0.0.1:" + strconv.Itoa(port)}
	if pin {
		proc.OnServerCPU(p.cmd)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		nc, err := nats.Connect(p.url)
		if err == nil {
			nc.Close()
			return p, nil
		}
		if time.Now().After(end) {
			p.Stop()
			return nil, fmt.Errorf("nats-server did not start: %v", err)
		}
	}
}

// Name implements System.
func (p *NATSPeer) Name() string { return "nats-server" }

// FilePerListener is true: every listener is a TCP connection.
func (p *NATSPeer) FilePerListener() bool { return true }

// Stop ends the server.
func (p *NATSPeer) Stop() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// Prepare implements System.
func (p *NATSPeer) Prepare(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, error) {
	st, join, err := p.PrepareJoins(ctx, meetings, clock)
	if err != nil {
		return nil, err
	}
	for i := range st.Listeners {
		if err := join(ctx, i); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// PrepareJoins implements Joiner: a publishing connection per meeting; a
// listener joins with a connection of its own subscribed to the meeting's
// subject. nats-server has no admission: it refuses nothing.
func (p *NATSPeer) PrepareJoins(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, func(context.Context, int) error, error) {
	if err := loadgen.RaiseFileLimit(2*len(meetings) + 2*total(meetings) + 256); err != nil {
		return nil, nil, err
	}
	st := &Setup{Listeners: newListeners(meetings)}
	var mu sync.Mutex
	var conns []*nats.Conn
	keep := func(c *nats.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	st.Close = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	subjects := make([]string, len(meetings))
	for m, mt := range meetings {
		subjects[m] = "bench.m" + strconv.Itoa(m)
		pub, err := nats.Connect(p.url, nats.NoReconnect())
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		keep(pub)
		subject := subjects[m]
		st.Speakers = append(st.Speakers, &loadgen.Speaker{Meeting: m, Stream: newStream(mt.Kind, m), SSRC: uint32(m + 1),
			Send: func(b []byte) error { return pub.Publish(subject, b) }})
	}
	join := func(ctx context.Context, i int) error {
		l := st.Listeners[i]
		nc, err := nats.Connect(p.url, nats.NoReconnect())
		if err != nil {
			return err
		}
		keep(nc)
		if _, err := nc.Subscribe(subjects[l.Meeting], func(msg *nats.Msg) {
			if pk, ok := loadgen.Parse(msg.Data); ok {
				l.Observe(pk, len(msg.Data), clock.Now())
			} else {
				l.Foreign++
			}
		}); err != nil {
			return err
		}
		return nc.Flush()
	}
	return st, join, nil
}

func total(ms []Meeting) int {
	n := 0
	for _, m := range ms {
		n += m.Listeners
	}
	return n
}
