package janus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one Janus API session: handles attach to it, and a long poll
// delivers their events by sender.
type Session struct {
	url    string
	id     int64
	mu     sync.Mutex
	events map[int64]chan map[string]any
	cancel context.CancelFunc
}

var transaction atomic.Uint64

func post(ctx context.Context, url string, body map[string]any) (map[string]any, error) {
	body["transaction"] = strconv.FormatUint(transaction.Add(1), 36)
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out["janus"] == "error" {
		return nil, fmt.Errorf("janus: %v", out["error"])
	}
	return out, nil
}

func dataID(m map[string]any) int64 {
	d, _ := m["data"].(map[string]any)
	f, _ := d["id"].(float64)
	return int64(f)
}

// NewSession creates a session on the server at url (Server.URL).
func NewSession(ctx context.Context, url string) (*Session, error) {
	out, err := post(ctx, url, map[string]any{"janus": "create"})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	s := &Session{url: url, id: dataID(out), events: map[int64]chan map[string]any{}, cancel: cancel}
	go s.poll(pctx)
	return s, nil
}

// poll long-polls the session's events (which also keeps it alive).
func (s *Session) poll(ctx context.Context) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/"+strconv.FormatInt(s.id, 10)+"?maxev=50", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var evs []map[string]any
		if len(b) > 0 && b[0] == '{' {
			var one map[string]any
			json.Unmarshal(b, &one)
			evs = append(evs, one)
		} else {
			json.Unmarshal(b, &evs)
		}
		for _, ev := range evs {
			sender, _ := ev["sender"].(float64)
			s.mu.Lock()
			ch := s.events[int64(sender)]
			s.mu.Unlock()
			if ch != nil {
				select {
				case ch <- ev:
				default:
				}
			}
		}
	}
}

// Close destroys the session (and so its handles).
func (s *Session) Close() {
	s.cancel()
	post(context.Background(), s.url+"/"+strconv.FormatInt(s.id, 10), map[string]any{"janus": "destroy"})
}

// Handle is a plugin handle.
type Handle struct {
	s      *Session
	id     int64
	name   string // the plugin's key in its events: "videoroom", "audiobridge"
	events chan map[string]any
}

// Attach attaches a handle of plugin ("janus.plugin.audiobridge").
func (s *Session) Attach(ctx context.Context, plugin string) (*Handle, error) {
	out, err := post(ctx, s.url+"/"+strconv.FormatInt(s.id, 10), map[string]any{"janus": "attach", "plugin": plugin})
	if err != nil {
		return nil, err
	}
	h := &Handle{s: s, id: dataID(out), name: plugin[strings.LastIndexByte(plugin, '.')+1:], events: make(chan map[string]any, 16)}
	s.mu.Lock()
	s.events[h.id] = h.events
	s.mu.Unlock()
	return h, nil
}

func (h *Handle) path() string {
	return h.s.url + "/" + strconv.FormatInt(h.s.id, 10) + "/" + strconv.FormatInt(h.id, 10)
}

// Request sends a synchronous plugin request (create, list…) and returns
// the plugin's answer data.
func (h *Handle) Request(ctx context.Context, body map[string]any) (map[string]any, error) {
	out, err := post(ctx, h.path(), map[string]any{"janus": "message", "body": body})
	if err != nil {
		return nil, err
	}
	pd, _ := out["plugindata"].(map[string]any)
	d, _ := pd["data"].(map[string]any)
	if e, ok := d["error"]; ok {
		return nil, fmt.Errorf("%s: %v", h.name, e)
	}
	return d, nil
}

// Message sends an asynchronous plugin request (with an SDP when jsep is
// set) and waits for the plugin's event carrying want in its plugin field
// ("joined"; "event" also matches a "started"; "" matches any).
func (h *Handle) Message(ctx context.Context, body map[string]any, jsep map[string]any, want string) (map[string]any, error) {
	req := map[string]any{"janus": "message", "body": body}
	if jsep != nil {
		req["jsep"] = jsep
	}
	if _, err := post(ctx, h.path(), req); err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-h.events:
			d := Data(ev)
			if e, ok := d["error"]; ok {
				return nil, fmt.Errorf("%s: %v", h.name, e)
			}
			if want == "" || d[h.name] == want || (want == "event" && d["started"] != nil) {
				return ev, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("no %q event from janus: %w", want, ctx.Err())
		}
	}
}

// Data returns an event's plugin data.
func Data(ev map[string]any) map[string]any {
	pd, _ := ev["plugindata"].(map[string]any)
	d, _ := pd["data"].(map[string]any)
	return d
}

// SDP returns the SDP an event carries.
func SDP(ev map[string]any) string {
	j, _ := ev["jsep"].(map[string]any)
	s, _ := j["sdp"].(string)
	return s
}
