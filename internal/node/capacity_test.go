package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
	"github.com/convene/convene/internal/udpmux"
)

// smallNode is a node that delivers at most 100 packets/s: two receivers
// of one unmeasured audio track (50 packets/s each).
func smallNode(t *testing.T) *Node {
	cfg := testConfig(t, t.TempDir())
	cfg.Capacity.PPS, cfg.Capacity.Headroom = 100, 0
	cfg.WebRTC.Enabled = true
	return startNode(t, cfg)
}

func TestSmallCapacityRefusesTheLinkThatWouldExceedIt(t *testing.T) {
	n := smallNode(t)
	s := createSession(t, n, "small")
	src := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": src.LocalAddr().String(), "kind": "audio", "direction": "sendonly"})

	// Each receiver adds the track's 50 packets/s; the third passes 100
	// (what is admitted counts while no packet flows yet).
	var admitted int
	var refused *http.Response
	var body []byte
	for i := 0; i < 6 && refused == nil; i++ {
		rx := udpConn(t)
		b, _ := json.Marshal(map[string]any{"remote": rx.LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
		req, _ := http.NewRequest("POST", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links", strings.NewReader(string(b)))
		req.Header.Set("X-API-Key", testAPIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 201:
			admitted++
		case 503:
			refused, body = resp, data
		default:
			t.Fatalf("receiver %d: %d %s", i, resp.StatusCode, data)
		}
	}
	if refused == nil || admitted != 2 {
		t.Fatalf("admitted %d receivers, refused %v: want 2, then a refusal", admitted, refused != nil)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(body, &e)
	if e.Error.Code != "over_capacity" || !strings.Contains(e.Error.Message, "would add 50 packets/s") || refused.Header.Get("Retry-After") == "" {
		t.Errorf("refusal: %s, Retry-After %q", body, refused.Header.Get("Retry-After"))
	}
	if strings.Contains(string(body), "alternatives") { // a lone node names no other
		t.Errorf("a lone node's refusal names alternatives: %s", body)
	}
	// Those admitted are still there.
	var got sessionJSON
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &got)
	if len(got.Links) != 3 {
		t.Errorf("session has %d links after the refusal, want 3", len(got.Links))
	}
	// A receiver removed makes room for another.
	var first linkJSON
	for _, l := range got.Links {
		if l.ID != got.Links[0].ID {
			first = l
			break
		}
	}
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links/"+first.ID, nil, nil); code != 204 && code != 200 {
		t.Fatalf("delete link: %d", code)
	}
	// (once the node has summed its links again: it does twice a second)
	rx := udpConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	refusedAgain := 0
	if err := rtctest.WaitFor(ctx, func() bool {
		code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links",
			map[string]any{"remote": rx.LocalAddr().String(), "kind": "audio", "direction": "recvonly"}, nil)
		if code == 503 {
			refusedAgain++
		}
		return code == 201
	}); err != nil {
		t.Fatal("no room for a receiver after one was removed")
	}
	// The refusal is counted, and the node shows its capacity.
	var node struct {
		Capacity struct {
			CapacityPPS float64           `json:"capacity_pps"`
			Measured    bool              `json:"measured"`
			Refused     map[string]uint64 `json:"refused"`
		} `json:"capacity"`
	}
	call(t, "GET", n.URL()+"/api/v1/node", nil, &node)
	if node.Capacity.CapacityPPS != 100 || node.Capacity.Measured || node.Capacity.Refused["link"] != uint64(1+refusedAgain) {
		t.Errorf("GET /node capacity %+v", node.Capacity)
	}
	resp, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{fmt.Sprintf(`convene_admission_refused_total{what="link"} %d`, 1+refusedAgain), "convene_node_capacity_pps 100", "convene_shed_level 0"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestSmallCapacityRefusesAWebRTCJoin(t *testing.T) {
	n := smallNode(t)
	s := createSession(t, n, "small-rtc")
	// Three unmeasured audio tracks: a browser joining would get 150/s.
	for range 3 {
		src := udpConn(t)
		addLink(t, n, s.ID, map[string]any{"remote": src.LocalAddr().String(), "kind": "audio", "direction": "sendonly"})
	}
	_, tok := joinMember(t, n, s.ID, "Ada")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, n.URL(), s.ID, tok, rtctest.Options{})
	if err == nil {
		c.Close()
		t.Fatal("the join was admitted")
	}
	if !strings.Contains(err.Error(), "over_capacity") || !strings.Contains(err.Error(), "would add 150 packets/s") {
		t.Errorf("join refused with %v, want over_capacity and the reason", err)
	}
	// A WHEP viewer likewise: 503 with the reason.
	_, _, err = rtctest.WHEP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "listener"), "")
	if err == nil || !strings.Contains(fmt.Sprint(err), "503") {
		t.Errorf("WHEP viewer: %v, want 503", err)
	}
}

func TestCapacityProbe(t *testing.T) {
	pps, err := probeCapacity(udpmux.Options{}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if pps <= 0 {
		t.Fatalf("probe measured %v packets/s", pps)
	}
	t.Logf("probe: %.0f packets/s", pps)
}

// TestSheddingUnderInjectedLoad: with the load signal injected past the
// capacity, the node steps through the shed levels in order, each an
// event on the session's stream; at the last a browser gets no video and
// still all audio; as the load falls it steps back and the video returns.
func TestSheddingUnderInjectedLoad(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WebRTC.Enabled = true
	n := startNode(t, cfg)
	n.govStop() // the test is the load signal now
	s := createSession(t, n, "shed")
	a, atok := joinMember(t, n, s.ID, "Ada")
	_, btok := joinMember(t, n, s.ID, "Bob")
	dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{})
	waitMedia(t, cb, a, "audio", "video")
	count := func(kind string) (n uint64) {
		for _, r := range cb.Received() {
			if r.Kind == kind && strings.HasPrefix(r.Stream, a) {
				n += r.Packets.Load()
			}
		}
		return n
	}
	capPPS := n.gov.Status().CapacityPPS
	for n.gov.Level() != capacity.NoVideo {
		n.gov.Observe(2 * capPPS)
	}
	// Whatever was queued arrives; after that, audio only.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	audio0, video0 := count("audio"), count("video")
	if err := rtctest.WaitFor(ctx, func() bool { return count("audio") >= audio0+25 }); err != nil {
		t.Fatal("audio stopped while shedding video")
	}
	audio1, video1 := count("audio"), count("video")
	if err := rtctest.WaitFor(ctx, func() bool { return count("audio") >= audio1+50 }); err != nil {
		t.Fatal("audio stopped while shedding video")
	}
	if v := count("video"); v != video1 {
		t.Errorf("video went on at no_video: %d packets, then %d more (before: %d)", video1-video0, v-video1, video0)
	}
	for n.gov.Level() != capacity.Normal {
		n.gov.Observe(0)
	}
	if err := rtctest.WaitFor(ctx, func() bool { return count("video") >= video1+20 }); err != nil {
		t.Fatal("video did not come back when the load fell")
	}
	evs, sub, _ := n.events.Subscribe(s.ID, 0)
	n.events.Unsubscribe(sub)
	var steps []string
	for _, ev := range evs {
		if ev.Type == event.LoadShed.String() {
			var d struct{ Shed, Message string }
			json.Unmarshal(ev.Data, &d)
			if d.Message == "" {
				t.Errorf("load.shed %s has no message", ev.Data)
			}
			steps = append(steps, d.Shed)
		}
	}
	want := []string{"lowest_layer", "speakers_video", "no_video", "speakers_video", "lowest_layer", "normal"}
	if !slices.Equal(steps, want) {
		t.Errorf("load.shed events %v, want %v", steps, want)
	}
}

// TestSmallCapacityRefusesAPhone: a phone dialling into a session on a
// node at its capacity gets 503 (SIPp's scenario fails on anything else),
// and the mixed link it would have had is counted as a refused mixer.
func TestSmallCapacityRefusesAPhone(t *testing.T) {
	testutil.NeedBinary(t, "sipp")
	cfg := testConfig(t, t.TempDir())
	cfg.Capacity.PPS, cfg.Capacity.Headroom = 100, 0
	cfg.SIP.Domain = "convene.test"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := n.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, n, "full")
	addLink(t, n, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "sendonly"})
	for range 2 { // 100 packets/s: the node is full
		addLink(t, n, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
	}
	phone := startSIPpAs(t, ctx, n, "dialin_busy.xml", s.ID, "carol", carolPass, 20*time.Second, "-trace_msg")
	phone.wait(t)
	// A lone node names no other: 503 with Retry-After, never 302.
	if msgs := phone.messages(t); !strings.Contains(msgs, "SIP/2.0 503") || !strings.Contains(msgs, "Retry-After:") ||
		strings.Contains(msgs, "SIP/2.0 302") {
		t.Errorf("the phone was not refused with 503 and Retry-After:\n%s", msgs)
	}
	if v := metricValue(t, n, `convene_admission_refused_total{what="mixer"}`); v != 1 {
		t.Errorf("mixers refused: %v, want the phone's 1", v)
	}
	var members struct{ Members []struct{ ID string } }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &members)
	if len(members.Members) != 0 {
		t.Errorf("the refused phone is still a member: %+v", members.Members)
	}
}

// p99Since reads the 99th percentile of what a histogram counted since the
// last call, by its own bounds; too few counts are no measure, and one
// past every bound is a second.
func TestP99Since(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1}
	var last []uint64
	if d := p99Since(&last, []uint64{10, 0, 0, 0}, bounds); d != -1 {
		t.Errorf("10 counts: %v, want -1", d)
	}
	if d := p99Since(&last, []uint64{1000, 0, 0, 0}, bounds); d != 0.001 {
		t.Errorf("990 within 1 ms: %v", d)
	}
	if d := p99Since(&last, []uint64{1900, 50, 50, 0}, bounds); d != 0.1 {
		t.Errorf("900 within 1 ms, 50 within 10, 50 within 100: %v, want 0.1", d)
	}
	if d := p99Since(&last, []uint64{2900, 50, 50, 100}, bounds); d != 1 {
		t.Errorf("100 of 1100 past every bound: %v, want 1", d)
	}
}
