package chatbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/conversation"
)

// member is one member's Go client on its conversation socket: what
// internal/node's chat tests do (dialChat, say, read), with the counts of
// the current step. Its reader goroutine owns the socket's reads; its
// sender (one a step) the writes; mu guards the Participant and counts.
type member struct {
	ws    *websocket.Conn
	hello chat.Hello
	join  time.Duration // dial → hello
	step  atomic.Uint32 // the step counted
	gone  atomic.Bool   // the node hung up (or the socket failed)

	mu      sync.Mutex
	p       *conversation.Participant
	arrived map[conversation.Dep]time.Time // held back by the Receiver
	c       counts
}

// counts are one member's figures for the current step.
type counts struct {
	sent, refused, received  uint64
	delivered, expired, late uint64
	ctxBytes                 uint64
	lastRefusal              string
	e2e, order               hist
}

// addMember makes a member of session sid, dials its conversation socket
// and waits for the hello (timed: the member's first join), then reads
// the socket until ctx ends.
func addMember(ctx context.Context, n *convene.Node, sid, name string) (*member, error) {
	var j struct{ Token struct{ Token string } }
	if err := n.API("POST", "/api/v1/sessions/"+sid+"/members", map[string]string{"name": name, "role": "participant"}, &j); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(n.URL, "http") + "/api/v1/sessions/" + sid + "/conversation"
	t0 := time.Now()
	c, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + j.Token.Token}}})
	if err != nil {
		return nil, err
	}
	m := &member{ws: c, arrived: map[conversation.Dep]time.Time{}}
	c.SetReadLimit(4 << 20) // a hello with 200 messages of history and every member
	typ, b, err := c.Read(dctx)
	m.join = time.Since(t0)
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &m.hello) != nil || m.hello.Type != "hello" {
		c.CloseNow()
		return nil, fmt.Errorf("hello: %v %.200q", err, b)
	}
	if m.p, err = chat.ParticipantFor(m.hello); err != nil {
		c.CloseNow()
		return nil, err
	}
	go m.read(ctx)
	return m, nil
}

// textFrame is the node's JSON: a member numbered, or a refusal.
type textFrame struct {
	Type string `json:"type"`
	N    uint32 `json:"n"`
	Code string `json:"code"`
}

func (m *member) read(ctx context.Context) {
	defer m.gone.Store(true)
	for {
		typ, b, err := m.ws.Read(ctx)
		now := time.Now()
		if err != nil {
			return
		}
		if typ == websocket.MessageText {
			var f textFrame
			json.Unmarshal(b, &f)
			m.mu.Lock()
			switch f.Type {
			case "member":
				m.p.Grow(int(f.N) + 1)
			case "error":
				m.c.refused++
				m.c.lastRefusal = f.Code
			}
			m.mu.Unlock()
			continue
		}
		var msg conversation.Message
		if err := conversation.Unmarshal(b, &msg); err != nil {
			continue
		}
		m.take(msg, now)
	}
}

// take counts a message read at now and gives it to the Receiver.
func (m *member) take(msg conversation.Message, now time.Time) {
	step := uint16(m.step.Load())
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := ReadStamp(msg.Payload); ok && st.Step == step {
		m.c.received++
		m.c.e2e.add(now.Sub(st.Sent))
	}
	ds, err := m.p.Receive(msg, now)
	if err != nil {
		return
	}
	self := conversation.Dep{Member: msg.Sender, Seq: msg.Seq}
	if !m.count(ds, step, self, now) {
		m.arrived[self] = now
	}
}

// count records deliveries of the step: how, and delivery − arrival;
// self arrived at now. It says whether self was among them. Called with
// mu held.
func (m *member) count(ds []conversation.Delivery, step uint16, self conversation.Dep, now time.Time) (selfDone bool) {
	at := time.Now()
	for _, d := range ds {
		id := conversation.Dep{Member: d.Message.Sender, Seq: d.Message.Seq}
		arrived := now
		if id == self {
			selfDone = true
		} else {
			arrived = m.arrived[id]
			delete(m.arrived, id)
		}
		if st, ok := ReadStamp(d.Message.Payload); !ok || st.Step != step {
			continue
		}
		switch d.Status {
		case conversation.Delivered:
			m.c.delivered++
		case conversation.Late:
			m.c.late++
		default:
			m.c.expired++
		}
		if !arrived.IsZero() {
			m.c.order.add(at.Sub(arrived))
		}
	}
	return selfDone
}

// tick delivers what reached its deadline (a message waiting for one
// that never came).
func (m *member) tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p.Held() > 0 {
		m.count(m.p.Tick(now), uint16(m.step.Load()), conversation.Dep{}, now)
	}
}

// begin starts step: its counts from zero.
func (m *member) begin(step uint16) {
	m.mu.Lock()
	m.c = counts{}
	m.step.Store(uint32(step))
	m.mu.Unlock()
}

// snapshot returns the step's counts so far.
func (m *member) snapshot() counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// send sends chat messages of size bytes at rate a second, from a random
// phase, until until: each stamped with step and its send time.
func (m *member) send(ctx context.Context, step uint16, rate float64, size int, until time.Time) {
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now().Add(time.Duration(rand.Int64N(int64(interval))))
	for next.Before(until) && !m.gone.Load() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		now := time.Now()
		payload := Stamp{Step: step, Sent: now}.AppendTo(make([]byte, 0, size), size)
		m.mu.Lock()
		msg, err := m.p.Send(chat.FlowChat, payload, now)
		if err != nil {
			m.mu.Unlock()
			return
		}
		m.c.sent++
		m.c.ctxBytes += uint64(msg.ContextSize())
		m.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = m.ws.Write(wctx, websocket.MessageBinary, msg.Marshal())
		cancel()
		if err != nil {
			return
		}
		next = next.Add(interval)
	}
}

func (m *member) close() { m.ws.CloseNow() }
