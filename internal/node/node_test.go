package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/testutil"
	"github.com/nats-io/nats.go"
	"github.com/pion/rtp"
)

// testConfig is a node on random ports with its data in a temp dir.
func testConfig(t *testing.T, dataDir string) config.Config {
	cfg := config.Default()
	cfg.NodeID = "test-node"
	cfg.DataDir = dataDir
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.RTP.Port = 0
	cfg.SIP.Listen = "127.0.0.1:0"
	cfg.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	cfg.Auth.APIKeys = testAPIKey
	cfg.Links.AllowDestinations = "127.0.0.0/8" // members' links to local test sockets
	cfg.WebRTC.UDPPort = 0                      // a port per connection: tests run side by side
	cfg.Recording.CapacityMbps = 10_000         // no disk probe at every start
	cfg.Capacity.PPS = 10_000_000               // no capacity probe either
	return cfg
}

// testAPIKey is the operator key of test nodes; call sends it.
const testAPIKey = "node-test-key"

func startNode(t *testing.T, cfg config.Config) *Node {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	n, err := Start(context.Background(), cfg, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Drain(context.Background()) })
	return n
}

// call does an HTTP request with a JSON body and decodes the JSON answer.
// getWithKey GETs url with the operator's key.
func getWithKey(url string) (*http.Response, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", testAPIKey)
	return http.DefaultClient.Do(req)
}

func call(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return resp.StatusCode
}

type sessionJSON struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	Owner      string     `json:"owner"`
	OwnerEpoch int64      `json:"owner_epoch"`
	Links      []linkJSON `json:"links"`
	Tracks     []struct {
		ID          string `json:"id"`
		Publisher   string `json:"publisher"`
		Subscribers int    `json:"subscribers"`
		Packets     uint64 `json:"packets"`
	} `json:"tracks"`
}

type linkJSON struct {
	ID     string `json:"id"`
	Remote string `json:"remote"`
	Local  struct {
		Addr     string `json:"addr"`
		RTPPort  int    `json:"rtp_port"`
		RTCPPort int    `json:"rtcp_port"`
	} `json:"local"`
	Stats struct {
		PacketsIn  uint64            `json:"packets_in"`
		PacketsOut uint64            `json:"packets_out"`
		Dropped    map[string]uint64 `json:"dropped"`
	} `json:"stats"`
}

func createSession(t *testing.T, n apiNode, name string) sessionJSON {
	t.Helper()
	var s sessionJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions", map[string]string{"name": name}, &s); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	return s
}

func addLink(t *testing.T, n apiNode, sid string, req map[string]any) linkJSON {
	t.Helper()
	var l linkJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+sid+"/rtp-links", req, &l); code != 201 {
		t.Fatalf("add link %v: %d", req, code)
	}
	return l
}

func udpConn(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// freePortPair finds an even port P with P and P+1 free, for ffmpeg's RTP
// and RTCP source ports.
func freePortPair(t *testing.T) int {
	t.Helper()
	// Below the kernel's ephemeral range (ip_local_port_range, 32768 and
	// up here): a port closed again for a child to bind is never handed
	// to another socket that asks for any port meanwhile, as one from the
	// range can be (TestFFmpegFanOut's ffmpeg once found its port taken).
	for i := 0; i < 200; i++ {
		p := 20000 + 2*rand.IntN(5000) // and below the relay's 30000-39999
		a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			continue
		}
		b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p + 1})
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// readRTP reads RTP packets until the socket has been quiet for idle.
func readRTP(c *net.UDPConn, idle time.Duration, first time.Duration) [][]byte {
	var out [][]byte
	buf := make([]byte, 2048)
	deadline := first
	for {
		c.SetReadDeadline(time.Now().Add(deadline))
		n, err := c.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, append([]byte(nil), buf[:n]...))
		deadline = idle
	}
}

// TestFFmpegFanOut: a real RTP sender (ffmpeg) publishes into a session with
// three receivers and one member that also talks. Every receiver gets every
// packet, in order, byte-exact; no one gets their own packets back.
func TestFFmpegFanOut(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "ffmpeg fan-out")

	src := freePortPair(t)
	ff := addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio", "direction": "sendrecv"})
	var rx []*net.UDPConn
	for i := 0; i < 3; i++ {
		c := udpConn(t)
		addLink(t, n, s.ID, map[string]any{"remote": c.LocalAddr().String(), "kind": "audio", "direction": "recvonly",
			"remote_rtcp": udpConn(t).LocalAddr().String()})
		rx = append(rx, c)
	}
	talker := udpConn(t)
	tl := addLink(t, n, s.ID, map[string]any{"remote": talker.LocalAddr().String(), "kind": "audio", "rtcp_mux": true})

	// The talker speaks too: its packets must reach the receivers and the
	// ffmpeg link but never come back to it.
	nodeRTP := &net.UDPAddr{IP: net.ParseIP(ff.Local.Addr), Port: ff.Local.RTPPort}
	const talkerSSRC = 0x7a1c3e55
	for i := 0; i < 5; i++ {
		pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: uint16(i), Timestamp: uint32(160 * i), SSRC: talkerSSRC},
			Payload: bytes.Repeat([]byte{byte(i)}, 160)}
		b, _ := pkt.Marshal()
		talker.WriteToUDP(b, nodeRTP)
	}

	out := fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", ff.Local.RTPPort, src, src+1)
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
		"-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}

	// What ffmpeg encoded, as one byte stream, to compare payloads with.
	want, err := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
		"-ar", "8000", "-ac", "1", "-f", "mulaw", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg reference: %v", err)
	}

	var got [][][]byte
	for _, c := range rx {
		got = append(got, readRTP(c, 500*time.Millisecond, 5*time.Second))
	}
	var sess sessionJSON
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
	var sent uint64
	for _, l := range sess.Links {
		if l.ID == ff.ID {
			sent = l.Stats.PacketsIn
		}
	}
	if sent < 50 {
		t.Fatalf("node accepted only %d packets from ffmpeg", sent)
	}
	for i, pkts := range got {
		var payload []byte
		var ffPkts, talkerPkts int
		var lastSeq uint16
		for j, b := range pkts {
			var p rtp.Packet
			if err := p.Unmarshal(b); err != nil {
				t.Fatalf("receiver %d packet %d: %v", i, j, err)
			}
			if p.SSRC == talkerSSRC {
				talkerPkts++
				continue
			}
			if ffPkts > 0 && p.SequenceNumber != lastSeq+1 {
				t.Fatalf("receiver %d: sequence %d after %d (lost or reordered)", i, p.SequenceNumber, lastSeq)
			}
			lastSeq = p.SequenceNumber
			ffPkts++
			payload = append(payload, p.Payload...)
		}
		if uint64(ffPkts) != sent || talkerPkts != 5 {
			t.Errorf("receiver %d got %d of ffmpeg's %d packets and %d of the talker's 5", i, ffPkts, sent, talkerPkts)
		}
		if !bytes.Equal(payload, want) {
			t.Errorf("receiver %d: payload differs from ffmpeg's encoding (%d bytes vs %d)", i, len(payload), len(want))
		}
		if i > 0 && len(pkts) == len(got[0]) {
			for j := range pkts {
				if !bytes.Equal(pkts[j], got[0][j]) {
					t.Fatalf("receivers 0 and %d differ at packet %d", i, j)
				}
			}
		}
	}
	// The talker hears ffmpeg but never itself.
	back := readRTP(talker, 300*time.Millisecond, time.Second)
	ffHeard := 0
	for _, b := range back {
		if len(b) > 1 && b[1] >= 192 && b[1] <= 223 {
			continue // RTCP from ffmpeg, muxed for the talker (RFC 5761)
		}
		var p rtp.Packet
		if err := p.Unmarshal(b); err != nil {
			t.Fatalf("talker got a bad packet: %v", err)
		}
		if p.SSRC == talkerSSRC {
			t.Fatal("talker received its own packet")
		}
		ffHeard++
	}
	if uint64(ffHeard) != sent {
		t.Errorf("talker heard %d of ffmpeg's %d packets", ffHeard, sent)
	}
	_ = tl
}

// TestEventsAndMetrics: lifecycle events on NATS, counters in the API and
// /metrics, and drops of packets from strangers.
func TestEventsAndMetrics(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	nc := n.Bus().Conn()
	events := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe("convene.>", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()

	s := createSession(t, n, "events")
	a, b := udpConn(t), udpConn(t)
	la := addLink(t, n, s.ID, map[string]any{"remote": a.LocalAddr().String(), "kind": "video", "rtcp_mux": true})
	addLink(t, n, s.ID, map[string]any{"remote": b.LocalAddr().String(), "kind": "video", "rtcp_mux": true})
	to := &net.UDPAddr{IP: net.ParseIP(la.Local.Addr), Port: la.Local.RTPPort}
	pkt, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SSRC: 1}, Payload: []byte("frame")}).Marshal()
	a.WriteToUDP(pkt, to)
	a.WriteToUDP([]byte{0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, to) // RTP version 1
	a.WriteToUDP([]byte{0x80, 0}, to)                               // truncated
	udpConn(t).WriteToUDP(pkt, to)                                  // a stranger
	if got := readRTP(b, 200*time.Millisecond, 5*time.Second); len(got) != 1 || !bytes.Equal(got[0], pkt) {
		t.Fatalf("b got %d packets", len(got))
	}

	want := []string{"convene.session." + s.ID + ".created", "convene.session." + s.ID + ".activated",
		"convene.session." + s.ID + ".link.added", "convene.node.test-node.heartbeat"}
	seen := map[string]bool{}
	for deadline := time.After(5 * time.Second); len(seen) < len(want); {
		select {
		case m := <-events:
			for _, w := range want {
				if m.Subject == w {
					seen[w] = true
				}
			}
		case <-deadline:
			t.Fatalf("events seen %v, want %v", seen, want)
		}
	}

	resp, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`convene_media_dropped_packets_total{reason="bad_version"} 1`,
		`convene_media_dropped_packets_total{reason="truncated"} 1`,
		`convene_media_dropped_packets_total{reason="unknown_source"} 1`,
		`convene_media_packets_received_total 1`,
		`convene_media_packets_sent_total 1`,
		`convene_sessions_active 1`,
		`convene_api_requests_total{code="201",route="POST /api/v1/sessions"} 1`,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	var health map[string]string
	if code := call(t, "GET", n.URL()+"/healthz", nil, &health); code != 200 || health["status"] != "ok" {
		t.Errorf("healthz %d %v", code, health)
	}
}

// TestRestartKeepsSessions: sessions and their links survive a restart on the
// same data directory; finished sessions stay finished.
func TestRestartKeepsSessions(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	n := startNode(t, cfg)
	s := createSession(t, n, "persistent")
	ended := createSession(t, n, "ended")
	a, b := udpConn(t), udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": a.LocalAddr().String(), "kind": "audio", "rtcp_mux": true})
	addLink(t, n, s.ID, map[string]any{"remote": b.LocalAddr().String(), "kind": "audio", "rtcp_mux": true})
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+ended.ID, nil, nil); code != 200 {
		t.Fatalf("end session: %d", code)
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, cfg)
	var got sessionJSON
	if code := call(t, "GET", n2.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 {
		t.Fatalf("after restart: %d", code)
	}
	if got.State != "activated" || len(got.Links) != 2 {
		t.Fatalf("after restart: state %s, %d links", got.State, len(got.Links))
	}
	var fin sessionJSON
	call(t, "GET", n2.URL()+"/api/v1/sessions/"+ended.ID, nil, &fin)
	if fin.State != "finished" {
		t.Fatalf("ended session is %s after restart", fin.State)
	}
	// The restored links carry media again, on the new node's port.
	to := &net.UDPAddr{IP: net.ParseIP(got.Links[0].Local.Addr), Port: got.Links[0].Local.RTPPort}
	pkt, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, SSRC: 9}, Payload: []byte("again")}).Marshal()
	a.WriteToUDP(pkt, to)
	if r := readRTP(b, 200*time.Millisecond, 5*time.Second); len(r) != 1 || !bytes.Equal(r[0], pkt) {
		t.Fatalf("restored link delivered %d packets", len(r))
	}
}
