package chat

import (
	"context"
	"time"
)

// A core NATS subscription reaches the cluster's other servers a moment
// after it is made, and what they publish before that is not delivered
// here: a message another node accepted just after this node opened its
// hub (its relay subscription) could reach neither this node's sockets
// live nor their hellos (read before it was stored). So for a while after
// opening, a hub reads the catalog again at catchUpAfter and sends each
// socket what it got neither in its hello nor live (Options.CatchUp).
var catchUpAfter = []time.Duration{500 * time.Millisecond, 2 * time.Second, 5 * time.Second}

// catchUpSkew is how much earlier than the hub's opening (on this node's
// clock) another node's clock may have stamped a message that still needs
// catching up.
const catchUpSkew = 2 * time.Second

// catchUpMessages is how many of the newest stored messages a catch-up
// reads.
const catchUpMessages = 4 * MaxHistory

// msgKey names a message: its sender's number and sequence number.
type msgKey struct {
	n   uint32
	seq uint64
}

// noteSent records that socket o has message k; h.mu is held.
func (o *Conn) noteSent(k msgKey) {
	if o.got != nil {
		o.got[k] = struct{}{}
	}
}

// catchUp runs the hub's catalog reads after it opened (catchUpAfter), then
// stops tracking what each socket got.
func (h *hub) catchUp(opened time.Time) {
	defer func() {
		h.mu.Lock()
		h.seen = nil
		for o := range h.conns {
			o.got, o.helloLast = nil, nil
		}
		h.mu.Unlock()
	}()
	for _, d := range h.s.o.CatchUp {
		select {
		case <-time.After(time.Until(opened.Add(d))):
		case <-h.done:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// More than a hello's history: the pointer's positions (ten a
		// second a member) must not push a missed chat line out.
		msgs, err := h.s.o.Catalog.Messages(ctx, h.session, catchUpMessages)
		cancel()
		if err != nil {
			h.s.log.Warn("catch up with the catalog", "session", h.session, "err", err)
			continue
		}
		h.mu.Lock()
		for _, m := range msgs {
			if m.ReceivedAt.Before(opened.Add(-catchUpSkew)) {
				continue
			}
			k := msgKey{m.Sender, m.Seq}
			if _, ok := h.seen[k]; !ok {
				// Neither accepted here nor relayed: the relay missed it.
				h.seen[k] = struct{}{}
				h.last[m.Sender] = max(h.last[m.Sender], m.Seq)
				h.s.m.caughtUp.Inc()
				if h.s.o.Notes != nil {
					h.s.o.Notes.NoteMessage(h.session, h.members[m.Sender].MemberID, m.Flow, m.Seq, m.Body)
				}
			}
			for o := range h.conns {
				if _, ok := o.got[k]; ok || o.got == nil || o.n == m.Sender || m.Seq <= o.helloLast[m.Sender] {
					continue
				}
				o.got[k] = struct{}{}
				o.push(outFrame{bin: append([]byte(nil), m.Body...)})
			}
		}
		h.mu.Unlock()
	}
}
