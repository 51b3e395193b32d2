package floorbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/bench/proc"
)

// Options configure a run.
type Options struct {
	Bin        string // the convene binary
	Iterations int    // floor requests and handovers measured (default 2000)
	Creates    int    // sessions created (default 500)
}

// Stats summarizes latencies in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	q := func(p float64) float64 { return ms(ds[min(len(ds)-1, int(p*float64(len(ds))))]) }
	return Stats{N: len(ds), Mean: ms(sum / time.Duration(len(ds))), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: ms(ds[len(ds)-1])}
}

// Result is one run.
type Result struct {
	Date     time.Time `json:"date"`
	Host     string    `json:"host"`
	CPUs     int       `json:"cpus"`
	Grant    Stats     `json:"request_to_grant"`
	Handover Stats     `json:"handover"`
	Create   Stats     `json:"session_create"`
	// Machine is the whole machine's CPU use during the run (this process,
	// the server and everything else on it).
	Machine Machine `json:"machine"`
}

// member is one joined member with its event socket.
type member struct {
	id, tok string
	ws      *websocket.Conn
	grants  chan time.Time // when a Granted event for this member arrived
	replies chan struct{}
}

// Run starts `convene serve`, measures, and stops it.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Iterations <= 0 {
		o.Iterations = 2000
	}
	if o.Creates <= 0 {
		o.Creates = 500
	}
	host, _ := os.Hostname()
	res := Result{Date: time.Now().UTC(), Host: host, CPUs: runtime.NumCPU()}
	dir, err := os.MkdirTemp("", "convene-bench-floor-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(o.Bin, dir)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	cpu0, _ := proc.ReadCPU()

	// Session create, sequential on one kept-alive connection.
	var creates []time.Duration
	var ids []string
	for i := 0; i < o.Creates && ctx.Err() == nil; i++ {
		var s struct{ ID string }
		t0 := time.Now()
		if err := srv.call("POST", "/api/v1/sessions", srv.key, map[string]string{"name": fmt.Sprint("bench-", i)}, &s, 201); err != nil {
			return res, err
		}
		creates = append(creates, time.Since(t0))
		ids = append(ids, s.ID)
	}
	res.Create = summarize(creates)

	sid := ids[0]
	if err := srv.call("PUT", "/api/v1/sessions/"+sid+"/floors/audio", srv.key,
		map[string]any{"style": "floor_control", "auto": true}, nil, 200); err != nil {
		return res, err
	}
	a, err := join(ctx, srv, sid)
	if err != nil {
		return res, err
	}
	defer a.ws.CloseNow()
	b, err := join(ctx, srv, sid)
	if err != nil {
		return res, err
	}
	defer b.ws.CloseNow()

	var grants, handovers []time.Duration
	for i := 0; i < o.Iterations && ctx.Err() == nil; i++ {
		// request → grant on a free floor.
		t0 := time.Now()
		if err := a.send(ctx, "request"); err != nil {
			return res, err
		}
		tg, err := a.waitGrant(ctx)
		if err != nil {
			return res, err
		}
		grants = append(grants, tg.Sub(t0))
		// b queues behind a; a releases: the token moves to b.
		if err := b.send(ctx, "request"); err != nil {
			return res, err
		}
		if err := b.waitReply(ctx); err != nil {
			return res, err
		}
		t1 := time.Now()
		if err := a.send(ctx, "release"); err != nil {
			return res, err
		}
		th, err := b.waitGrant(ctx)
		if err != nil {
			return res, err
		}
		handovers = append(handovers, th.Sub(t1))
		if err := a.waitReply(ctx); err != nil { // a's request reply
			return res, err
		}
		if err := a.waitReply(ctx); err != nil { // a's release reply
			return res, err
		}
		if err := b.send(ctx, "release"); err != nil {
			return res, err
		}
		if err := b.waitReply(ctx); err != nil {
			return res, err
		}
	}
	res.Grant, res.Handover = summarize(grants), summarize(handovers)
	res.Machine = machineSince(cpu0)
	for _, id := range ids {
		srv.call("DELETE", "/api/v1/sessions/"+id, srv.key, nil, nil, 200)
	}
	return res, ctx.Err()
}

func join(ctx context.Context, srv *server, sid string) (*member, error) {
	var tok struct{ Token string }
	if err := srv.call("POST", "/api/v1/sessions/"+sid+"/tokens", srv.key, map[string]string{"role": "participant"}, &tok, 201); err != nil {
		return nil, err
	}
	var j struct {
		Member struct{ ID string }
		Token  struct{ Token string }
	}
	if err := srv.call("POST", "/api/v1/sessions/"+sid+"/members", tok.Token, map[string]string{"name": "bench"}, &j, 201); err != nil {
		return nil, err
	}
	m := &member{id: j.Member.ID, tok: j.Token.Token, grants: make(chan time.Time, 16), replies: make(chan struct{}, 16)}
	u := "ws" + strings.TrimPrefix(srv.url, "http") + "/api/v1/sessions/" + sid + "/events"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + m.tok}}})
	if err != nil {
		return nil, err
	}
	m.ws = c
	started := make(chan struct{})
	go m.read(started)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("no stream.start from the event socket")
	}
	return m, nil
}

type frame struct {
	Type string `json:"type"`
	Data struct {
		Member string `json:"member"`
		Status string `json:"status"`
	} `json:"data"`
}

// read timestamps each frame as soon as it is read.
func (m *member) read(started chan struct{}) {
	for {
		_, b, err := m.ws.Read(context.Background())
		now := time.Now()
		if err != nil {
			return
		}
		var f frame
		json.Unmarshal(b, &f)
		switch {
		case f.Type == "stream.start":
			close(started)
		case f.Type == "reply":
			m.replies <- struct{}{}
		case f.Type == "floor.request" && f.Data.Member == m.id && f.Data.Status == "Granted":
			m.grants <- now
		}
	}
}

func (m *member) send(ctx context.Context, op string) error {
	return m.ws.Write(ctx, websocket.MessageText, []byte(`{"op":"`+op+`","floor":"audio"}`))
}

func (m *member) waitGrant(ctx context.Context) (time.Time, error) {
	select {
	case t := <-m.grants:
		return t, nil
	case <-time.After(10 * time.Second):
		return time.Time{}, fmt.Errorf("no grant within 10 s")
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

func (m *member) waitReply(ctx context.Context) error {
	select {
	case <-m.replies:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no reply within 10 s")
	case <-ctx.Done():
		return ctx.Err()
	}
}
