package events

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/convene/convene/internal/event"
)

// Event is one change of a session.
type Event struct {
	Seq       uint64          `json:"seq"`
	SessionID string          `json:"session_id"`
	Type      string          `json:"type"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data,omitempty"`
	// Node is the node the event happened on, when not this one (Remote).
	Node string `json:"node,omitempty"`
}

// Bus publishes an event on NATS; *bus.Bus is one.
type Bus interface {
	SessionEventSeq(sessionID string, typ event.Type, seq uint64, data any) error
}

// Options configure a Hub.
type Options struct {
	Bus    Bus // nil: no NATS
	Keep   int // events kept per session (default 1024)
	Buffer int // events queued per subscriber before it is cut off (default 1024)
	// Ended is how many logs of sessions that ended (a "finished" or
	// "canceled" event) are kept for late readers; older ones are dropped
	// (default 256), so a node's memory does not grow with its history.
	Ended  int
	Now    func() time.Time
	Logger *slog.Logger
}

// Hub holds the event logs of a node's sessions.
type Hub struct {
	o    Options
	base uint64

	mu    sync.Mutex // guards logs and ended
	logs  map[string]*sessionLog
	ended []string // sessions whose last event was final, oldest first
}

type sessionLog struct {
	mu   sync.Mutex // orders a session's events; held while publishing
	last uint64     // sequence number of the newest event
	ring []Event    // the newest len(ring) <= Keep events, oldest first once full
	head int        // index of the oldest event when the ring is full
	subs map[*Sub]struct{}
}

// Sub is a subscription to one session's events.
type Sub struct {
	c      chan Event
	reason string
	log    *sessionLog
}

// C delivers the events. It is closed when the subscriber falls Buffer
// events behind (Reason says so) or unsubscribes.
func (s *Sub) C() <-chan Event { return s.c }

// Reason says why C was closed.
func (s *Sub) Reason() string {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.reason
}

// New returns a hub.
func New(o Options) *Hub {
	if o.Keep <= 0 {
		o.Keep = 1024
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.Ended <= 0 {
		o.Ended = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{o: o, base: uint64(o.Now().Unix()) << 20, logs: map[string]*sessionLog{}}
}

func (h *Hub) log(id string) *sessionLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.logs[id]
	if l == nil {
		l = &sessionLog{last: h.base, subs: map[*Sub]struct{}{}}
		h.logs[id] = l
	}
	return l
}

// SessionEvent appends an event to a session's stream and publishes it. It
// implements the session service's Publisher.
func (h *Hub) SessionEvent(sessionID string, typ event.Type, data any) error {
	var raw json.RawMessage
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		raw = b
	}
	l := h.log(sessionID)
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := h.append(l, Event{SessionID: sessionID, Type: typ.String(), Time: h.o.Now().UTC(), Data: raw})
	if h.o.Bus != nil {
		// Under the session's lock, so NATS sees the same order.
		if err := h.o.Bus.SessionEventSeq(sessionID, typ, ev.Seq, raw); err != nil {
			h.o.Logger.Warn("publish session event", "session", sessionID, "event", typ, "err", err)
		}
	}
	if typ == event.Finished || typ == event.Canceled {
		h.retire(sessionID)
	}
	return nil
}

// append numbers ev in l, logs it and hands it to l's subscribers; l.mu
// is held.
func (h *Hub) append(l *sessionLog, ev Event) Event {
	l.last++
	ev.Seq = l.last
	if len(l.ring) < h.o.Keep {
		l.ring = append(l.ring, ev)
	} else {
		l.ring[l.head] = ev
		l.head = (l.head + 1) % len(l.ring)
	}
	for s := range l.subs {
		select {
		case s.c <- ev:
		default:
			s.reason = "subscriber fell behind; reconnect with after=<last seq>"
			delete(l.subs, s)
			close(s.c)
		}
	}
	return ev
}

// Remote takes an event of a session that happened on another node of
// the cluster (heard on NATS): it joins this node's stream of the session
// with this node's next number and Node set, so a client sees a session's
// changes wherever they were made. It is not published again. Only the
// sessions this node keeps a log of take it (a client or a change of its
// own opened it), so a node's memory does not grow with the cluster's
// sessions.
func (h *Hub) Remote(ev Event) {
	h.mu.Lock()
	l := h.logs[ev.SessionID]
	h.mu.Unlock()
	if l == nil || ev.Node == "" {
		return
	}
	l.mu.Lock()
	h.append(l, ev)
	l.mu.Unlock()
	if ev.Type == event.Finished.String() || ev.Type == event.Canceled.String() {
		h.retire(ev.SessionID)
	}
}

// retire remembers that a session ended and forgets the oldest ended
// session's log beyond Options.Ended. Its subscribers keep their channels
// until they unsubscribe.
func (h *Hub) retire(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = append(h.ended, id)
	for len(h.ended) > h.o.Ended {
		delete(h.logs, h.ended[0])
		h.ended = h.ended[1:]
	}
}

// Resume is where a subscription starts.
type Resume struct {
	// Last is the newest sequence number when the subscription began.
	Last uint64 `json:"last_seq"`
	// Gap is set when events after the client's `after` have left the log.
	Gap bool `json:"gap"`
}

// Subscribe returns the logged events after seq `after` (none if after is
// negative: live events only) and a subscription for the events that
// follow them, with no gap and no repeat between the two.
func (h *Hub) Subscribe(sessionID string, after int64) ([]Event, *Sub, Resume) {
	l := h.log(sessionID)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &Sub{c: make(chan Event, h.o.Buffer), log: l}
	l.subs[s] = struct{}{}
	res := Resume{Last: l.last}
	if after < 0 {
		return nil, s, res
	}
	ordered := append(append([]Event(nil), l.ring[l.head:]...), l.ring[:l.head]...)
	var out []Event
	for _, ev := range ordered {
		if ev.Seq > uint64(after) {
			out = append(out, ev)
		}
	}
	oldest := l.last + 1
	if len(ordered) > 0 {
		oldest = ordered[0].Seq
	}
	// Missed events are gone if the oldest kept is not the one right after.
	if after == 0 { // "everything": missed only if this run's first events left
		res.Gap = oldest > h.base+1
	} else {
		res.Gap = uint64(after) < l.last && uint64(after)+1 < oldest
	}
	return out, s, res
}

// Unsubscribe ends a subscription and closes its channel.
func (h *Hub) Unsubscribe(s *Sub) {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	if _, ok := s.log.subs[s]; ok {
		delete(s.log.subs, s)
		close(s.c)
	}
}

// Last returns the newest sequence number of a session.
func (h *Hub) Last(sessionID string) uint64 {
	l := h.log(sessionID)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
