package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/rtctest"
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

	// Each receiver adds the track's 50 packets/s; the third passes 100.
	// (Admitted packets count until the load shows them, a few seconds:
	// the loop is quicker than that by far.)
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
	var e struct{ Error struct{ Code, Message string } }
	json.Unmarshal(body, &e)
	if e.Error.Code != "over_capacity" || !strings.Contains(e.Error.Message, "would add 50 packets/s") || refused.Header.Get("Retry-After") == "" {
		t.Errorf("refusal: %s, Retry-After %q", body, refused.Header.Get("Retry-After"))
	}
	// Those admitted are still there.
	var got sessionJSON
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &got)
	if len(got.Links) != 3 {
		t.Errorf("session has %d links after the refusal, want 3", len(got.Links))
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
	if node.Capacity.CapacityPPS != 100 || node.Capacity.Measured || node.Capacity.Refused["link"] != 1 {
		t.Errorf("GET /node capacity %+v", node.Capacity)
	}
	resp, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`convene_admission_refused_total{what="link"} 1`, "convene_node_capacity_pps 100", "convene_shed_level 0"} {
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
