package loadgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/node"
)

func post(t *testing.T, url string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "load-test-key") // the node's operator key (cfg.Auth.APIKeys)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	if out != nil {
		json.Unmarshal(data, out)
	}
}

// TestAgainstNode runs the load generator for a few seconds at a small size
// against a real node: one audio and one video meeting. Every listener gets
// every counted packet of its own meeting and nothing else; the figures are
// computed (no timing is asserted).
func TestAgainstNode(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Addr, cfg.RTP.Port, cfg.NodeID = t.TempDir(), "127.0.0.1:0", 0, "load-test"
	cfg.Auth.APIKeys = "load-test-key"
	cfg.SIP.Listen = "127.0.0.1:0"
	cfg.WebRTC.Enabled = false // not measured here; its default port may be another test's
	n, err := node.Start(context.Background(), cfg, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Drain(context.Background())
	rtp := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(n.RTPAddr()))

	const perMeeting = 20
	kinds := []loadgen.Kind{loadgen.Audio, loadgen.Video}
	var listeners []*loadgen.Listener
	for m, k := range kinds {
		for i := 0; i < perMeeting; i++ {
			listeners = append(listeners, &loadgen.Listener{Meeting: m, Kind: k, Index: i})
		}
	}
	clock := loadgen.NewClock()
	lis, err := loadgen.ListenUDP(netip.MustParseAddr("127.0.0.1"), listeners, 2, 4<<20, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var speakers []*loadgen.Speaker
	for m, k := range kinds {
		var s struct{ ID string }
		post(t, n.URL()+"/api/v1/sessions", map[string]string{"name": fmt.Sprint("m", m)}, &s)
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		post(t, n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links", map[string]any{"remote": conn.LocalAddr().String(), "kind": k.String(), "direction": "sendonly"}, nil)
		for i := 0; i < perMeeting; i++ {
			post(t, n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links", map[string]any{"remote": lis.Addrs()[m*perMeeting+i].String(), "kind": k.String(), "direction": "recvonly"}, nil)
		}
		stream := loadgen.NewAudio()
		if k == loadgen.Video {
			stream = loadgen.NewVideo(1)
		}
		speakers = append(speakers, &loadgen.Speaker{Meeting: m, Stream: stream, SSRC: uint32(m + 1),
			Send: func(b []byte) error { _, err := conn.WriteToUDP(b, rtp); return err }})
	}
	lis.Start()
	loadgen.RunSpeakers(context.Background(), clock, speakers, 4*time.Second)
	time.Sleep(300 * time.Millisecond)
	lis.Close()

	for _, s := range speakers {
		if s.Counted == 0 || s.Errors != 0 {
			t.Fatalf("speaker %d sent %d counted packets, %d errors", s.Meeting, s.Counted, s.Errors)
		}
	}
	for _, l := range listeners {
		sent := speakers[l.Meeting].Counted
		if l.Unstamped != 0 {
			t.Errorf("listener %d/%d: %d packets without a kernel timestamp", l.Meeting, l.Index, l.Unstamped)
		}
		if l.Received != sent || l.Foreign != 0 {
			t.Errorf("listener %d/%d: received %d of %d, %d foreign", l.Meeting, l.Index, l.Received, sent, l.Foreign)
		}
		if l.AvgLatency() <= 0 || l.LatencyMax < l.AvgLatency() {
			t.Errorf("listener %d/%d: latency avg %v max %v", l.Meeting, l.Index, l.AvgLatency(), l.LatencyMax)
		}
	}
	t.Logf("audio listener 0: avg %v jitter %v; video listener 0: avg %v jitter %v",
		listeners[0].AvgLatency(), listeners[0].Jitter(), listeners[perMeeting].AvgLatency(), listeners[perMeeting].Jitter())
}
