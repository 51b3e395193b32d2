package brokerbench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
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
func StartNATS() (*NATSPeer, error) {
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
	if err := loadgen.RaiseFileLimit(2*len(meetings) + 2*total(meetings) + 256); err != nil {
		return nil, err
	}
	st := &Setup{Listeners: newListeners(meetings)}
	var conns []*nats.Conn
	st.Close = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	fail := func(err error) (*Setup, error) { st.Close(); return nil, err }
	li := 0
	for m, mt := range meetings {
		subject := "bench.m" + strconv.Itoa(m)
		for i := 0; i < mt.Listeners; i++ {
			nc, err := nats.Connect(p.url, nats.NoReconnect())
			if err != nil {
				return fail(err)
			}
			conns = append(conns, nc)
			l := st.Listeners[li]
			li++
			if _, err := nc.Subscribe(subject, func(msg *nats.Msg) {
				if pk, ok := loadgen.Parse(msg.Data); ok {
					l.Observe(pk, len(msg.Data), clock.Now())
				} else {
					l.Foreign++
				}
			}); err != nil {
				return fail(err)
			}
			if err := nc.Flush(); err != nil {
				return fail(err)
			}
		}
		pub, err := nats.Connect(p.url, nats.NoReconnect())
		if err != nil {
			return fail(err)
		}
		conns = append(conns, pub)
		st.Speakers = append(st.Speakers, &loadgen.Speaker{Meeting: m, Stream: newStream(mt.Kind, m), SSRC: uint32(m + 1),
			Send: func(b []byte) error { return pub.Publish(subject, b) }})
	}
	return st, nil
}

func total(ms []Meeting) int {
	n := 0
	for _, m := range ms {
		n += m.Listeners
	}
	return n
}
