package bridge

import (
	"hash/fnv"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go"
)

// NATS adapts a NATS connection to Conn: each subscription's handler runs
// on nats.go's goroutine for it (the control connection: few messages).
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

// MediaQueue is how many messages each of a MediaConn's queues holds;
// nats.go drops what a full queue cannot take and counts a slow consumer.
const MediaQueue = 16384

// MediaConn adapts a media connection to Conn. nats.go gives every async
// subscription a goroutine of its own and wakes it for each message that
// finds it idle: with a subscription per pulled track, nearly every
// packet cost a goroutine wake-up (and the scheduler's spinning around
// it). Here every subscription's messages go instead into one of a few
// queues (by subject, so a track's packets keep their order), each drained
// by one goroutine, which takes a burst of packets — any tracks — in one
// wake-up. Close stops the goroutines.
type MediaConn struct {
	nc       *nats.Conn
	queues   []chan *nats.Msg
	mu       sync.RWMutex
	handlers map[*nats.Subscription]func(string, []byte)
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

// NATSMedia returns a MediaConn on nc with a queue per CPU.
func NATSMedia(nc *nats.Conn) *MediaConn {
	c := &MediaConn{nc: nc, handlers: map[*nats.Subscription]func(string, []byte){}, done: make(chan struct{})}
	for range max(1, runtime.GOMAXPROCS(0)) {
		q := make(chan *nats.Msg, MediaQueue)
		c.queues = append(c.queues, q)
		c.wg.Add(1)
		go c.drain(q)
	}
	return c
}

// Publish implements Conn.
func (c *MediaConn) Publish(subject string, data []byte) error { return c.nc.Publish(subject, data) }

// Subscribe implements Conn.
func (c *MediaConn) Subscribe(subject string, handler func(string, []byte)) (func(), error) {
	h := fnv.New32a()
	h.Write([]byte(subject))
	q := c.queues[h.Sum32()%uint32(len(c.queues))]
	// Held across the subscription, so a message that arrives at once
	// finds its handler.
	c.mu.Lock()
	sub, err := c.nc.ChanSubscribe(subject, q)
	if err == nil {
		c.handlers[sub] = handler
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func() {
		_ = sub.Unsubscribe()
		c.mu.Lock()
		delete(c.handlers, sub)
		c.mu.Unlock()
	}, nil
}

// drain hands q's messages to their subscriptions' handlers; a message
// of a subscription already ended is let go.
func (c *MediaConn) drain(q chan *nats.Msg) {
	defer c.wg.Done()
	for {
		select {
		case m := <-q:
			c.mu.RLock()
			h := c.handlers[m.Sub]
			c.mu.RUnlock()
			if h != nil {
				h(m.Subject, m.Data)
			}
		case <-c.done:
			return
		}
	}
}

// Close stops the queues' goroutines (the connection is its owner's to
// close).
func (c *MediaConn) Close() {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
}
