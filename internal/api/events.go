package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/event"
)

// parseAfter reads where a reconnecting client resumes: ?after=<seq>, or
// the Last-Event-ID header; -1 (neither) means live events only, 0 every
// event still kept.
func parseAfter(query, header string) (int64, error) {
	v := query
	if v == "" {
		v = header
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		return 0, errors.New("after must be a sequence number (0 or more)")
	}
	return int64(n), nil
}

// wsReply answers a command sent over the event WebSocket.
type wsReply struct {
	Type   string       `json:"type"` // "reply"
	ID     string       `json:"id,omitempty"`
	OK     bool         `json:"ok"`
	Result any          `json:"result,omitempty"`
	Error  *errorDetail `json:"error,omitempty"`
}

// sessionEvents streams a session's events over a WebSocket: first a
// "stream.start" frame ({last_seq, gap}), then the kept events after
// `after`, then live ones, each {seq, session_id, type, time, data}. The
// client may send floor primitives as {"id", "op", "floor", ...} and gets
// a {"type":"reply"} frame for each; their effects arrive as events.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	p, ok := s.caller(w, r, sid, false)
	if !ok {
		return
	}
	after, err := parseAfter(r.URL.Query().Get("after"), r.Header.Get("Last-Event-ID"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if _, err := s.o.Sessions.Get(r.Context(), sid); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	if s.o.Events == nil {
		writeError(w, http.StatusNotImplemented, "no_events", "this server has no event stream")
		return
	}
	if reason := s.ws.take(sid, s.o.WSMaxPerSession, s.o.WSMax); reason != "" {
		s.m.wsRefused.WithLabelValues(reason).Inc()
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", "too many event streams open ("+reason+" cap)")
		return
	}
	defer s.ws.give(sid)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 10)
	backlog, sub, res := s.o.Events.Subscribe(sid, after)
	defer s.o.Events.Unsubscribe(sub)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Keep-alive: a client that does not answer a ping within WSPing is
	// gone (a half-open TCP connection would otherwise hold its
	// subscription forever).
	go s.keepAlive(ctx, cancel, c)

	replies := make(chan []byte, 16)
	go func() {
		defer cancel()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			rep := s.wsCommand(ctx, p, sid, data)
			b, _ := json.Marshal(rep)
			select {
			case replies <- b:
			case <-ctx.Done():
				return
			}
		}
	}()

	write := func(v any) bool {
		b, _ := json.Marshal(v)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		return c.Write(wctx, websocket.MessageText, b) == nil
	}
	if !write(map[string]any{"type": "stream.start", "last_seq": res.Last, "gap": res.Gap}) {
		return
	}
	for _, ev := range backlog {
		if !write(ev) {
			return
		}
	}
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				c.Close(websocket.StatusTryAgainLater, sub.Reason())
				return
			}
			if !write(ev) {
				return
			}
			if p.member != "" && ev.Type == event.MemberLeft.String() && leftID(ev.Data) == p.member {
				// The member token died with its member: so does its stream.
				c.Close(websocket.StatusPolicyViolation, "the member has left the session")
				return
			}
		case b := <-replies:
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.Write(wctx, websocket.MessageText, b)
			wcancel()
			if err != nil {
				return
			}
		case <-ctx.Done():
			c.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
}

// wsCommand runs one floor primitive sent over the WebSocket.
func (s *Server) wsCommand(ctx context.Context, p principal, sid string, data []byte) wsReply {
	var b floorBody
	if err := decodeJSON(data, &b); err != nil {
		return wsReply{Type: "reply", Error: &errorDetail{Code: "invalid_request", Message: err.Error()}}
	}
	out, err := s.floorAction(ctx, p, sid, b.Floor, b.Op, b)
	if err == nil {
		err = s.o.Sessions.FloorsSaved(ctx, sid) // the reply acknowledges a durable change
	}
	if err != nil {
		code, msg := "internal", err.Error()
		if _, c, ok := floorStatus(err); ok {
			code = c
		} else if st, c := serviceStatus(err); st != http.StatusInternalServerError {
			code = c
		}
		return wsReply{Type: "reply", ID: b.ID, Error: &errorDetail{Code: code, Message: msg}}
	}
	return wsReply{Type: "reply", ID: b.ID, OK: true, Result: out}
}

// wsCount counts open event WebSockets per session and in all.
type wsCount struct {
	mu    sync.Mutex
	total int
	by    map[string]int
}

// take reserves a stream of session sid, or names the cap it would pass.
func (c *wsCount) take(sid string, perSession, total int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	switch {
	case c.total >= total:
		return "node"
	case c.by[sid] >= perSession:
		return "session"
	}
	c.total++
	c.by[sid]++
	return ""
}

func (c *wsCount) give(sid string) {
	c.mu.Lock()
	c.total--
	if c.by[sid]--; c.by[sid] <= 0 {
		delete(c.by, sid)
	}
	c.mu.Unlock()
}

// leftID is the member id of a member.left event's data.
func leftID(data json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(data, &v)
	return v.ID
}
