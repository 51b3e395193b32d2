package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/event"
)

const waitFor = 5 * time.Second

var fixedTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newBus(t *testing.T, opts Options) *Bus {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b, err := Connect(ctx, opts)
	if err != nil {
		t.Fatalf("Connect(%+v): %v", opts, err)
	}
	t.Cleanup(b.Close)
	return b
}

func subscribe(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	msg, err := sub.NextMsg(waitFor)
	if err != nil {
		t.Fatalf("waiting on %s: %v", sub.Subject, err)
	}
	return msg
}

// wireEvent mirrors Event with raw data for precise JSON assertions.
type wireEvent struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	NodeID    string          `json:"node_id"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data"`
}

func decode(t *testing.T, msg *nats.Msg) (wireEvent, map[string]any) {
	t.Helper()
	var ev wireEvent
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatalf("decode %s: %v (%s)", msg.Subject, err, msg.Data)
	}
	var raw map[string]any
	if err := json.Unmarshal(msg.Data, &raw); err != nil {
		t.Fatalf("decode %s: %v", msg.Subject, err)
	}
	return ev, raw
}

func TestEmbeddedInProcess(t *testing.T) {
	b := newBus(t, Options{NodeID: "node-1", Now: func() time.Time { return fixedTime }})
	if !b.Embedded() {
		t.Error("Embedded() = false, want true")
	}
	if got := b.ClientURL(); got != "" {
		t.Errorf("ClientURL() = %q, want empty for in-process only", got)
	}
	if b.Conn() == nil || !b.Conn().IsConnected() {
		t.Fatal("Conn() not connected")
	}
	if got := b.NodeID(); got != "node-1" {
		t.Errorf("NodeID() = %q", got)
	}
}

func TestSessionEvents(t *testing.T) {
	b := newBus(t, Options{NodeID: "node-1", Now: func() time.Time { return fixedTime }})
	sub := subscribe(t, b.Conn(), AllSessionEvents)

	type linkData struct {
		LinkID string `json:"link_id"`
	}
	tests := []struct {
		typ     event.Type
		subject string
		data    any
		want    string // JSON of data, "" for omitted
	}{
		{event.Created, "convene.session.s-42.created", map[string]string{"name": "standup"}, `{"name":"standup"}`},
		{event.Activated, "convene.session.s-42.activated", nil, ""},
		{event.Deactivated, "convene.session.s-42.deactivated", nil, ""},
		{event.Finished, "convene.session.s-42.finished", nil, ""},
		{event.Canceled, "convene.session.s-42.canceled", nil, ""},
		{event.LinkAdded, "convene.session.s-42.link.added", linkData{"l-1"}, `{"link_id":"l-1"}`},
		{event.LinkRemoved, "convene.session.s-42.link.removed", linkData{"l-1"}, `{"link_id":"l-1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			if subj, err := SessionSubject("s-42", tc.typ); err != nil || subj != tc.subject {
				t.Fatalf("SessionSubject = %q, %v; want %q", subj, err, tc.subject)
			}
			if err := b.SessionEvent("s-42", tc.typ, tc.data); err != nil {
				t.Fatalf("SessionEvent: %v", err)
			}
			msg := next(t, sub)
			if msg.Subject != tc.subject {
				t.Fatalf("subject = %q, want %q", msg.Subject, tc.subject)
			}
			ev, raw := decode(t, msg)
			if ev.Type != tc.typ.String() || ev.SessionID != "s-42" || ev.NodeID != "node-1" || !ev.Time.Equal(fixedTime) {
				t.Errorf("event = %+v", ev)
			}
			if raw["time"] != "2024-05-06T07:08:09Z" {
				t.Errorf("time = %v", raw["time"])
			}
			if tc.want == "" {
				if _, ok := raw["data"]; ok {
					t.Errorf("data present, want omitted: %s", msg.Data)
				}
			} else if string(ev.Data) != tc.want {
				t.Errorf("data = %s, want %s", ev.Data, tc.want)
			}
		})
	}

	if err := b.SessionEvent("s-42", event.Type(200), nil); !errors.Is(err, ErrUnknownEvent) {
		t.Errorf("unknown type: err = %v, want ErrUnknownEvent", err)
	}
}

func TestPublishDefaultsAndOverrides(t *testing.T) {
	b := newBus(t, Options{NodeID: "node-1", Now: func() time.Time { return fixedTime.In(time.FixedZone("X", 3600)) }})
	sub := subscribe(t, b.Conn(), "convene.custom")

	if err := b.Publish("convene.custom", Event{Type: "x"}); err != nil {
		t.Fatal(err)
	}
	ev, raw := decode(t, next(t, sub))
	if ev.NodeID != "node-1" || raw["time"] != "2024-05-06T07:08:09Z" {
		t.Errorf("defaults not applied: %+v", raw)
	}
	if _, ok := raw["session_id"]; ok {
		t.Errorf("empty session_id not omitted: %v", raw)
	}

	other := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := b.Publish("convene.custom", Event{Type: "x", NodeID: "node-9", Time: other}); err != nil {
		t.Fatal(err)
	}
	ev, _ = decode(t, next(t, sub))
	if ev.NodeID != "node-9" || !ev.Time.Equal(other) {
		t.Errorf("explicit fields overridden: %+v", ev)
	}

	if err := b.Publish("", Event{}); err == nil {
		t.Error("Publish with empty subject succeeded")
	}
	if err := b.Publish("convene.custom", Event{Data: make(chan int)}); err == nil {
		t.Error("Publish with unencodable data succeeded")
	}
}

func TestNodeEvents(t *testing.T) {
	b := newBus(t, Options{NodeID: "node-7"})
	sub := subscribe(t, b.Conn(), AllNodeEvents)
	for _, typ := range []string{EventDraining, EventStopped} {
		if err := b.NodeEvent(typ, map[string]int{"sessions": 3}); err != nil {
			t.Fatalf("NodeEvent(%s): %v", typ, err)
		}
		msg := next(t, sub)
		if want := "convene.node.node-7." + typ; msg.Subject != want {
			t.Errorf("subject = %q, want %q", msg.Subject, want)
		}
		ev, _ := decode(t, msg)
		if ev.Type != typ || ev.NodeID != "node-7" || string(ev.Data) != `{"sessions":3}` || ev.Time.IsZero() {
			t.Errorf("event = %+v data=%s", ev, ev.Data)
		}
	}
	if err := b.NodeEvent("created", nil); !errors.Is(err, ErrUnknownEvent) {
		t.Errorf("NodeEvent(created): err = %v", err)
	}
}

func TestHeartbeat(t *testing.T) {
	start := time.Now()
	b := newBus(t, Options{NodeID: "hb-node", Version: "1.2.3"})
	sub := subscribe(t, b.Conn(), AllHeartbeats)

	want := Load{RecordingFreeBps: 40e6, MixersFree: 3, Sessions: 2, Links: 3, Tracks: 5, PacketsIn: 100, PacketsOut: 200, Drops: 1,
		Goroutines: 10, HeapBytes: 4096, CPUSeconds: 1.5, CapacityPPS: 500000, LoadPPS: 1234.5, ShedLevel: 1,
		AdmitPPS: 400000, CommittedPPS: 2000}
	pub := Public{URL: "https://a.example", SIP: "a.example:5060", TokenKey: "0123456789abcdef"}
	b.SetPublic(pub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.RunHeartbeat(ctx, 50*time.Millisecond, func() Load { return want })
	}()

	for i := 0; i < 2; i++ {
		msg := next(t, sub)
		if msg.Subject != "convene.node.hb-node.heartbeat" {
			t.Fatalf("subject = %q", msg.Subject)
		}
		ev, raw := decode(t, msg)
		if ev.Type != EventHeartbeat || ev.NodeID != "hb-node" || ev.SessionID != "" {
			t.Errorf("event = %+v", ev)
		}
		var hb Heartbeat
		if err := json.Unmarshal(ev.Data, &hb); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(hb.Load, want) || hb.Public != pub || hb.Version != "1.2.3" || hb.CapacityPPS != 500000 || hb.Rates != (Rates{}) {
			t.Errorf("heartbeat = %+v", hb)
		}
		if hb.UptimeSeconds < 0 || hb.UptimeSeconds > time.Since(start).Seconds() {
			t.Errorf("uptime = %v", hb.UptimeSeconds)
		}
		data := raw["data"].(map[string]any)
		for _, k := range []string{"sessions", "links", "tracks", "packets_in", "packets_out", "drops",
			"goroutines", "heap_bytes", "cpu_seconds", "uptime_seconds", "version",
			"packets_in_per_second", "packets_out_per_second", "cpu_cores", "capacity_pps", "load_pps", "shed_level",
			"admit_pps", "committed_pps", "recording_free_bps", "mixers_free", "public_url", "sip", "token_key"} {
			if _, ok := data[k]; !ok {
				t.Errorf("heartbeat data lacks %q: %s", k, ev.Data)
			}
		}
		if len(data) != 24 {
			t.Errorf("heartbeat data has %d keys, want 24: %s", len(data), ev.Data)
		}
	}

	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("RunHeartbeat did not return after ctx cancel")
	}
}

// Rates come from the difference between two beats' loads over the time
// between them, on the bus's clock: here each beat is 2 s after the last
// and 100 packets in, 900 out and half a CPU second later.
func TestHeartbeatRates(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	b := newBus(t, Options{NodeID: "hb-node", Now: now})
	sub := subscribe(t, b.Conn(), AllHeartbeats)
	var ld Load
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.RunHeartbeat(ctx, 20*time.Millisecond, func() Load {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(2 * time.Second)
		ld.PacketsIn, ld.PacketsOut, ld.CPUSeconds = ld.PacketsIn+100, ld.PacketsOut+900, ld.CPUSeconds+0.5
		return ld
	})
	for i, want := range []Rates{{}, {PacketsInPerSecond: 50, PacketsOutPerSecond: 450, CPUCores: 0.25}} {
		ev, _ := decode(t, next(t, sub))
		var hb Heartbeat
		if err := json.Unmarshal(ev.Data, &hb); err != nil {
			t.Fatal(err)
		}
		if hb.Rates != want {
			t.Errorf("beat %d: rates %+v, want %+v", i, hb.Rates, want)
		}
	}
	// A counter that went down (a restart) is no change, not a negative rate.
	if r := rates(Load{PacketsIn: 10, CPUSeconds: 3}, Load{PacketsIn: 5, PacketsOut: 4, CPUSeconds: 1}, time.Second); r != (Rates{PacketsOutPerSecond: 4}) {
		t.Errorf("rates after a reset = %+v", r)
	}
	if r := rates(Load{}, Load{PacketsIn: 5}, 0); r != (Rates{}) {
		t.Errorf("rates over no time = %+v", r)
	}
}

// WatchNodes hears every node's heartbeats, draining and stopped, and
// drops what does not decode.
func TestWatchNodes(t *testing.T) {
	b := newBus(t, Options{NodeID: "watcher"})
	got := make(chan NodeStatus, 16)
	stop, err := b.WatchNodes(func(st NodeStatus) { got <- st })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	nc := b.Conn()
	nc.Publish("convene.node.junk.heartbeat", []byte("{not json"))
	nc.Publish("convene.node.other.services", []byte("{}")) // not watched
	ctx, cancel := context.WithCancel(context.Background())
	go b.RunHeartbeat(ctx, time.Hour, func() Load { return Load{Sessions: 4, CapacityPPS: 7} })
	var st NodeStatus
	select {
	case st = <-got:
	case <-time.After(waitFor):
		t.Fatal("no heartbeat status")
	}
	cancel()
	if st.NodeID != "watcher" || st.Type != EventHeartbeat || st.Heartbeat.Sessions != 4 || st.Heartbeat.CapacityPPS != 7 {
		t.Errorf("heartbeat status = %+v", st)
	}
	for _, typ := range []string{EventDraining, EventStopped} {
		if err := b.NodeEvent(typ, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case st := <-got:
			if st.NodeID != "watcher" || st.Type != typ {
				t.Errorf("status = %+v, want %s", st, typ)
			}
		case <-time.After(waitFor):
			t.Fatalf("no %s status", typ)
		}
	}
	stop()
	nc.Flush()
	b.NodeEvent(EventDraining, nil)
	nc.Flush()
	select {
	case st := <-got:
		t.Errorf("status after stop: %+v", st)
	default:
	}
}

func TestHeartbeatStopsOnClose(t *testing.T) {
	b := newBus(t, Options{NodeID: "hb-node"})
	sub := subscribe(t, b.Conn(), AllHeartbeats)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.RunHeartbeat(context.Background(), 50*time.Millisecond, nil) // nil load: zero values
	}()
	ev, _ := decode(t, next(t, sub))
	var hb Heartbeat
	if err := json.Unmarshal(ev.Data, &hb); err != nil || !reflect.DeepEqual(hb.Load, Load{}) || hb.Version != "dev" {
		t.Errorf("heartbeat = %+v, %v", hb, err)
	}
	b.Close()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("RunHeartbeat did not return after Close")
	}
	// After Close, RunHeartbeat returns immediately.
	b.RunHeartbeat(context.Background(), time.Hour, nil)
}

func TestInvalidIDs(t *testing.T) {
	bad := []string{"", "a.b", ".", "a*", "*", ">", "a>", "a b", " a", "a\tb", "a\nb", "a\u00a0b", "a\x00b", "\xff"}
	for _, id := range bad {
		if _, err := SessionSubject(id, event.Created); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("SessionSubject(%q): err = %v", id, err)
		}
		if _, err := SessionWildcard(id); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("SessionWildcard(%q): err = %v", id, err)
		}
		if _, err := NodeSubject(id, EventHeartbeat); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("NodeSubject(%q): err = %v", id, err)
		}
		if _, err := HeartbeatSubject(id); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("HeartbeatSubject(%q): err = %v", id, err)
		}
		if err := ValidateToken(id); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ValidateToken(%q): err = %v", id, err)
		}
		if b, err := Connect(context.Background(), Options{NodeID: id}); !errors.Is(err, ErrInvalidToken) {
			if b != nil {
				b.Close()
			}
			t.Errorf("Connect(NodeID %q): err = %v", id, err)
		}
	}
	for _, id := range []string{"a", "s-42", "node_1", "0190c9e0-7b7e-7b7e-8000-000000000000", "ünïcode"} {
		if err := ValidateToken(id); err != nil {
			t.Errorf("ValidateToken(%q) = %v", id, err)
		}
	}
	if got, err := SessionWildcard("s-1"); err != nil || got != "convene.session.s-1.>" {
		t.Errorf("SessionWildcard = %q, %v", got, err)
	}
	if _, err := NodeSubject("n", "link.added"); !errors.Is(err, ErrUnknownEvent) {
		t.Errorf("NodeSubject with session type: %v", err)
	}

	b := newBus(t, Options{NodeID: "node-1"})
	sub := subscribe(t, b.Conn(), ">")
	for _, id := range bad {
		if err := b.SessionEvent(id, event.Created, nil); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("SessionEvent(%q): err = %v", id, err)
		}
	}
	if err := b.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Errorf("rejected event was published on %q", msg.Subject)
	}
}

func TestConnectErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Connect(ctx, Options{NodeID: "n"}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: err = %v", err)
	}
	for _, l := range []string{"nohostport", "127.0.0.1:http", "127.0.0.1:70000"} {
		if b, err := Connect(context.Background(), Options{NodeID: "n", Listen: l}); err == nil {
			b.Close()
			t.Errorf("Listen %q accepted", l)
		}
	}
	port := freePort(t)
	if b, err := Connect(context.Background(), Options{NodeID: "n", URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}); err == nil {
		b.Close()
		t.Error("connect to closed port succeeded")
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestExternal starts an embedded server listening on TCP and connects a
// second Bus to it by URL, exercising the external-NATS path.
func TestExternal(t *testing.T) {
	port := freePort(t)
	srvBus := newBus(t, Options{NodeID: "hub", Listen: fmt.Sprintf("127.0.0.1:%d", port)})
	wantURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if !srvBus.Embedded() || srvBus.ClientURL() != wantURL {
		t.Fatalf("embedded=%v ClientURL=%q, want %q", srvBus.Embedded(), srvBus.ClientURL(), wantURL)
	}

	ext := newBus(t, Options{NodeID: "edge", URL: srvBus.ClientURL()})
	if ext.Embedded() {
		t.Error("external bus reports Embedded")
	}
	if ext.ClientURL() != wantURL {
		t.Errorf("external ClientURL = %q, want %q", ext.ClientURL(), wantURL)
	}
	if got := ext.Conn().Opts.Name; got != "convene-edge" {
		t.Errorf("connection name = %q", got)
	}

	// external -> embedded
	sessSub := subscribe(t, srvBus.Conn(), "convene.session.s-1.>")
	if err := ext.SessionEvent("s-1", event.LinkAdded, map[string]string{"link_id": "l"}); err != nil {
		t.Fatal(err)
	}
	msg := next(t, sessSub)
	ev, _ := decode(t, msg)
	if msg.Subject != "convene.session.s-1.link.added" || ev.NodeID != "edge" || ev.Type != event.LinkAdded.String() {
		t.Errorf("got %s %+v", msg.Subject, ev)
	}

	// embedded -> external
	hbSub := subscribe(t, ext.Conn(), "convene.node.hub.heartbeat")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srvBus.RunHeartbeat(ctx, 50*time.Millisecond, func() Load { return Load{Sessions: 1} })
	for i := 0; i < 2; i++ {
		ev, _ := decode(t, next(t, hbSub))
		if ev.NodeID != "hub" || ev.Type != EventHeartbeat {
			t.Errorf("heartbeat %+v", ev)
		}
	}

	// Server name is visible to outside clients.
	raw, err := nats.Connect(wantURL)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if got := raw.ConnectedServerName(); got != "convene-hub" {
		t.Errorf("server name = %q", got)
	}
}

func TestListenRandomPort(t *testing.T) {
	for _, l := range []string{"127.0.0.1:0", "127.0.0.1:-1"} {
		b := newBus(t, Options{NodeID: "n", Listen: l})
		u := b.ClientURL()
		if !strings.HasPrefix(u, "nats://127.0.0.1:") || strings.HasSuffix(u, ":0") ||
			strings.HasSuffix(u, ":-1") || strings.HasSuffix(u, ":4222") {
			t.Errorf("Listen %q: ClientURL = %q", l, u)
		}
		nc, err := nats.Connect(u)
		if err != nil {
			t.Fatalf("dial %s: %v", u, err)
		}
		nc.Close()
	}
}

func TestListenUnspecifiedHost(t *testing.T) {
	b := newBus(t, Options{NodeID: "n", Listen: ":-1"})
	if u := b.ClientURL(); !strings.HasPrefix(u, "nats://127.0.0.1:") {
		t.Errorf("ClientURL = %q", u)
	}
}

// ourGoroutines returns stacks of goroutines running bus or NATS code.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "ourGoroutines") || strings.Contains(g, "testing.tRunner") {
			continue // the calling test itself
		}
		if strings.Contains(g, "github.com/nats-io/") || strings.Contains(g, "convene/internal/bus.") {
			out = append(out, g)
		}
	}
	return out
}

func TestCloseIdempotentNoLeaks(t *testing.T) {
	// Let goroutines of earlier tests wind down first.
	deadline := time.Now().Add(waitFor)
	base := ourGoroutines()
	for len(base) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		base = ourGoroutines()
	}

	for _, mode := range []string{"in-process", "listen", "external"} {
		t.Run(mode, func(t *testing.T) {
			var hub *Bus
			opts := Options{NodeID: "leak", Logger: testLogger(t)}
			switch mode {
			case "listen":
				opts.Listen = "127.0.0.1:-1"
			case "external":
				var err error
				hub, err = Connect(context.Background(), Options{NodeID: "hub", Listen: "127.0.0.1:-1"})
				if err != nil {
					t.Fatal(err)
				}
				opts.URL = hub.ClientURL()
			}
			b, err := Connect(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			sub := subscribe(t, b.Conn(), AllHeartbeats)
			hbDone := make(chan struct{})
			go func() {
				defer close(hbDone)
				b.RunHeartbeat(context.Background(), 50*time.Millisecond, nil)
			}()
			next(t, sub)

			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); b.Close() }()
			}
			wg.Wait()
			b.Close()
			<-hbDone
			if !b.Conn().IsClosed() {
				t.Error("connection not closed after Close")
			}
			if err := b.SessionEvent("s", event.Created, nil); err == nil {
				t.Error("publish after Close succeeded")
			}
			if hub != nil {
				hub.Close()
				hub.Close()
			}

			deadline := time.Now().Add(waitFor)
			left := ourGoroutines()
			for len(left) > len(base) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				left = ourGoroutines()
			}
			if len(left) > len(base) {
				t.Errorf("%d goroutines left running (baseline %d):\n%s", len(left), len(base), strings.Join(left, "\n\n"))
			}
		})
	}
}

func TestProcessCPUSeconds(t *testing.T) {
	a := ProcessCPUSeconds()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	_ = x
	b := ProcessCPUSeconds()
	if a <= 0 || b < a {
		t.Errorf("ProcessCPUSeconds: %v then %v", a, b)
	}
}

// A NATS URL's password never reaches logs or the API: each URL of the
// list is masked.
func TestRedactURLs(t *testing.T) {
	got := redactURLs("nats://convene:s3cr3t@10.0.0.1:4222, nats://10.0.0.2:4222,tls://u:p4ss@h:4222")
	if strings.Contains(got, "s3cr3t") || strings.Contains(got, "p4ss") {
		t.Errorf("redactURLs = %q shows a password", got)
	}
	if want := "nats://convene:xxxxx@10.0.0.1:4222,nats://10.0.0.2:4222,tls://u:xxxxx@h:4222"; got != want {
		t.Errorf("redactURLs = %q, want %q", got, want)
	}
	if got := redactURLs("nats://u:s3cr3t@h:port"); strings.Contains(got, "s3cr3t") {
		t.Errorf("an unparsable URL is shown: %q", got)
	}
}
