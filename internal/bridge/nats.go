package bridge

import "github.com/nats-io/nats.go"

// NATS adapts a NATS connection to Conn.
func NATS(nc *nats.Conn) Conn { return natsConn{nc} }

type natsConn struct{ nc *nats.Conn }

func (c natsConn) Publish(subject string, data []byte) error { return c.nc.Publish(subject, data) }

func (c natsConn) Subscribe(subject string, handler func(string, []byte)) (func(), error) {
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) { handler(m.Subject, m.Data) })
	if err != nil {
		return nil, err
	}
	// A pulled track may burst (a video keyframe): let its subscription
	// hold more than nats.go's default before it counts a slow consumer.
	_ = sub.SetPendingLimits(65536, 64<<20)
	return func() { _ = sub.Unsubscribe() }, nil
}
