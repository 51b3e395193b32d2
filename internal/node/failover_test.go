package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/testutil"
	"github.com/convene/convene/internal/webui"
)

// apiNode is a node a test reaches over HTTP: an in-process *Node or a
// child process (childNode).
type apiNode interface{ URL() string }

// childNodeEnv names the JSON config file of a node run as a child
// process of the test binary (TestChildNode).
const childNodeEnv = "CONVENE_TEST_CHILD_NODE"

// TestChildNode is not a test of its own: it is a node that a failover
// test started as a child process of the test binary (startChildNode), so
// that the test can kill it with SIGKILL — no drain, no goodbye on NATS,
// leases left to expire, files cut wherever the writers were. It reads its
// config from the file childNodeEnv names, logs to node.log in its data
// dir, prints "ready <url> <rtp address> <sip address>" and serves until
// killed.
func TestChildNode(t *testing.T) {
	path := os.Getenv(childNodeEnv)
	if path == "" {
		t.Skip("the child node of the failover tests")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(cfg.DataDir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n, err := Start(context.Background(), cfg, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ready %s %s %s\n", n.URL(), n.RTPAddr(), n.SIPAddr())
	time.Sleep(10 * time.Minute)
	os.Exit(3) // never drain: the parent kills us first
}

// childNode is a node running as a child process (TestChildNode).
type childNode struct {
	cfg           config.Config
	url, rtp, sip string
	cmd           *exec.Cmd
	once          sync.Once
}

func (c *childNode) URL() string { return c.url }

// kill9 kills the node with SIGKILL and waits for it to be gone.
func (c *childNode) kill9() {
	c.once.Do(func() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.cmd.Wait()
	})
}

// logTail is the end of what the node logged.
func (c *childNode) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.cfg.DataDir, "node.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// startChildNode runs a node with cfg as a child process of the test
// binary; it dies with the test (SIGKILL at the end, and if the test
// process dies first, Pdeathsig).
func startChildNode(t *testing.T, cfg config.Config) *childNode {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node.json") // holds the catalog's DSN: 0600
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildNode$", "-test.timeout=15m")
	cmd.Env = append(os.Environ(), childNodeEnv+"="+path)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childNode{cfg: cfg, cmd: cmd}
	t.Cleanup(func() {
		c.kill9()
		if t.Failed() {
			t.Logf("child node %s logged, at the end:\n%s", cfg.NodeID, c.logTail())
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "ready %s %s %s", &c.url, &c.rtp, &c.sip); err == nil {
				ready <- true
				break
			}
		}
		close(ready)
		for sc.Scan() { // the rest (go test's PASS/FAIL), so the child never blocks on a full pipe
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("child node %s exited before it was ready:\n%s", cfg.NodeID, c.logTail())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("child node %s not ready:\n%s", cfg.NodeID, c.logTail())
	}
	return c
}

// startClusterWithChild starts a cluster of the nodes others in process
// and node child as a child process, which the test can kill with SIGKILL.
func startClusterWithChild(t *testing.T, child string, others ...string) (*cluster, *childNode) {
	t.Helper()
	if os.Getenv(childNodeEnv) != "" {
		t.Skip("in the child")
	}
	c := startCluster(t, others...)
	return c, startChildNode(t, c.config(t, child))
}

// failoverRecordingJSON is a recording as GET /api/v1/recordings/{id}
// shows its place in the cluster.
type failoverRecordingJSON struct {
	recordingJSON
	Files []struct {
		FileBytes int64 `json:"file_bytes"`
	} `json:"files"`
	Node     string `json:"node"`
	Segment  int    `json:"segment"`
	Segments []struct {
		Seq       int    `json:"seq"`
		Node      string `json:"node"`
		State     string `json:"state"`
		SizeBytes int64  `json:"size_bytes"`
		Streams   int    `json:"streams"`
	} `json:"segments"`
}

// seqsIn reads every rtpdump file in dir and returns the RTP sequence
// numbers it holds, checking each packet is byte for byte what
// rtpPacket made.
func seqsIn(t *testing.T, dir string) map[uint16]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.rtpdump"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rtpdump files in %s (%v)", dir, err)
	}
	seqs := map[uint16]bool{}
	for _, f := range files {
		rtp, _ := readDump(t, f)
		for _, p := range rtp {
			q := binary.BigEndian.Uint16(p[2:])
			if !bytes.Equal(p, rtpPacket(q)) {
				t.Fatalf("%s: packet %d is not what was sent", f, q)
			}
			seqs[q] = true
		}
	}
	return seqs
}

// paceRTP sends rtpPacket(1), (2), … from sender to dst every 10 ms (20 ms
// of PCMU each), telling sent (if set) each number before it goes, until
// the returned func is called (it waits for the sender; idempotent).
func paceRTP(sender *net.UDPConn, dst *net.UDPAddr, sent func(seq uint16)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for seq := uint16(1); ; seq++ {
			select {
			case <-quit:
				return
			default:
			}
			if sent != nil {
				sent(seq)
			}
			sender.WriteToUDP(rtpPacket(seq), dst)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// TestRecordingContinuesAfterKill9: three nodes, three nats-servers and
// PostgreSQL. Node A — a child process — owns a session and records it;
// the media come from a plain RTP sender on node B, across the bridge.
// A is killed with SIGKILL. The survivor that takes the session over (B
// or C) continues the same recording in segment 2 on its disk, announces
// recording.moved, and records the sender's later packets; A's segment
// keeps every packet sent more than a second before the kill (after the
// repair A would do itself). Stopped through the survivor, the recording
// is finished, with A's segment interrupted; A started again on its data
// dir stores its segment's size and takes nothing over.
func TestRecordingContinuesAfterKill9(t *testing.T) {
	c, a := startClusterWithChild(t, "node-a", "node-b", "node-c")
	b, cn := c.nodes[0], c.nodes[1]
	acfg := a.cfg

	s := createSession(t, a, "failover")
	t.Cleanup(func() {
		if t.Failed() { // what the in-process nodes said of the session
			for _, l := range strings.Split(c.logs.String(), "\n") {
				if strings.Contains(l, s.ID) || strings.Contains(l, "component=failover") {
					t.Log(l)
				}
			}
		}
	})
	m1, _ := joinMember(t, b, s.ID, "Ada")
	sender := udpConn(t)
	addLink(t, b, s.ID, map[string]any{"remote": sender.LocalAddr().String(), "kind": "audio", "direction": "sendonly",
		"rtcp_mux": true, "member": m1})
	var rec failoverRecordingJSON
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "failover"}, &rec); code != 201 {
		t.Fatalf("start the recording on node A: %d", code)
	}
	if rec.Node != "node-a" || rec.Segment != 1 {
		t.Fatalf("the recording started on %q, segment %d", rec.Node, rec.Segment)
	}
	moved, err := b.Bus().Conn().SubscribeSync("convene.session." + s.ID + ".recording.moved")
	if err != nil {
		t.Fatal(err)
	}

	// The sender sends 20 ms of PCMU every 10 ms until the end.
	dst, err := net.ResolveUDPAddr("udp", b.RTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sentAt := map[uint16]time.Time{}
	stopSending := paceRTP(sender, dst, func(seq uint16) {
		mu.Lock()
		sentAt[seq] = time.Now()
		mu.Unlock()
	})
	defer stopSending()

	// packets is about how many packets a node wrote of its segment so
	// far (the sidecars count them only at the end): 8 bytes of rtpdump
	// record header and 172 of packet each.
	packets := func(n apiNode) (failoverRecordingJSON, int64) {
		var got failoverRecordingJSON
		call(t, "GET", n.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
		var sum int64
		for _, f := range got.Files {
			sum += f.FileBytes / (8 + 172)
		}
		return got, sum
	}
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if _, n := packets(a); n < 100 {
			return fmt.Sprintf("node A recorded %d of B's packets", n)
		}
		return ""
	})

	a.kill9()
	killed := time.Now()
	var survivor *Node
	var got failoverRecordingJSON
	testutil.WaitUntil(t, 90*time.Second, func() string {
		call(t, "GET", b.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
		if got.State != "recording" || got.Segment != 2 || (got.Node != "node-b" && got.Node != "node-c") {
			return fmt.Sprintf("recording %s on %q, segment %d, %s", rec.ID, got.Node, got.Segment, got.State)
		}
		return ""
	})
	continued := time.Since(killed)
	survivor = b
	if got.Node == "node-c" {
		survivor = cn
	}
	if m, err := moved.NextMsg(30 * time.Second); err != nil {
		t.Errorf("no recording.moved event reached node B: %v", err)
	} else if !strings.Contains(string(m.Data), `"from":"node-a"`) {
		t.Errorf("recording.moved = %s", m.Data)
	}
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if _, n := packets(survivor); n < 100 {
			return fmt.Sprintf("%s recorded %d packets in segment 2", survivor.cfg.NodeID, n)
		}
		return ""
	})
	t.Logf("the recording continued on %s %v after the kill (lease TTL %v, renewed every %v)", got.Node,
		continued.Round(100*time.Millisecond), session.DefaultLeaseTTL, session.DefaultLeaseRenew)
	stopSending()

	// Stopped through the other survivor, which passes the stop to the
	// node that writes it.
	other := cn
	if survivor == cn {
		other = b
	}
	var stopped failoverRecordingJSON
	if code := call(t, "POST", other.URL()+"/api/v1/recordings/"+rec.ID+"/stop", nil, &stopped); code != 200 ||
		stopped.State != "finished" || stopped.Node != survivor.cfg.NodeID {
		t.Fatalf("stop through %s: %d %+v", other.cfg.NodeID, code, stopped)
	}
	if survivor.recordings.Running() != 0 {
		t.Fatalf("%s still writes %d recordings", survivor.cfg.NodeID, survivor.recordings.Running())
	}
	call(t, "GET", b.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
	if len(got.Segments) != 2 || got.Segments[0].Node != "node-a" || got.Segments[0].State != "interrupted" ||
		got.Segments[1].Node != survivor.cfg.NodeID || got.Segments[1].State != "finished" || got.Segments[1].SizeBytes == 0 {
		t.Fatalf("segments: %+v", got.Segments)
	}

	// A's segment, repaired as A repairs it at its start: nothing sent
	// more than a second before the kill is missing.
	if _, err := recorder.Repair(acfg.RecordingDir()); err != nil {
		t.Fatal(err)
	}
	first := seqsIn(t, filepath.Join(acfg.RecordingDir(), rec.ID))
	second := seqsIn(t, filepath.Join(survivor.cfg.RecordingDir(), rec.ID+"-2"))
	lo, hi1, lo2 := uint16(0xffff), uint16(0), uint16(0xffff)
	for q := range first {
		lo, hi1 = min(lo, q), max(hi1, q)
	}
	for q := range second {
		lo2 = min(lo2, q)
	}
	missing := 0
	mu.Lock()
	for q, at := range sentAt {
		if q >= lo && at.Before(killed.Add(-time.Second)) && !first[q] {
			missing++
		}
	}
	mu.Unlock()
	if missing > 0 {
		t.Errorf("A's segment lacks %d packets sent more than 1 s before the kill", missing)
	}
	if lo2 <= hi1 {
		t.Errorf("segment 2 starts at packet %d, not after segment 1's last (%d): two writers at once", lo2, hi1)
	}
	t.Logf("segment 1 on node A: packets %d–%d (%d); segment 2 on %s: from %d (%d); %d packets sent while no node recorded",
		lo, hi1, len(first), survivor.cfg.NodeID, lo2, len(second), int(lo2)-int(hi1)-1)

	// A starts again on its data dir: it stores its segment as it finds
	// it, and the recording stays finished.
	again := c.start(t, "node-a", func(cfg *config.Config) { cfg.DataDir = acfg.DataDir })
	call(t, "GET", again.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
	if got.State != "finished" || len(got.Segments) != 2 || got.Segments[0].State != "interrupted" ||
		got.Segments[0].SizeBytes == 0 || got.Segments[0].Streams != 1 {
		t.Errorf("after node A's restart: %+v", got)
	}
	if again.recordings.Running() != 0 {
		t.Error("node A restarted a finished recording")
	}
}

// TestLinksRehomedAfterKill9: node A — a child process — serves two plain
// RTP links of a session node B owns: a sender's and a receiver's. A is
// killed with SIGKILL. Once B's registry has not heard A for its stale
// time, B, the owner, opens both links on its own socket: GET shows their
// new local address, link.added tells the operator, the sender's packets
// sent there reach a receiver on B and the re-homed receiver.
func TestLinksRehomedAfterKill9(t *testing.T) {
	c, a := startClusterWithChild(t, "node-a", "node-b")
	b := c.nodes[0]
	s := createSession(t, b, "links")
	m1, _ := joinMember(t, a, s.ID, "Ada")
	m2, _ := joinMember(t, b, s.ID, "Bob")
	m3, _ := joinMember(t, a, s.ID, "Cy")
	sender, rB, rA := udpConn(t), udpConn(t), udpConn(t)
	sl := addLink(t, a, s.ID, map[string]any{"remote": sender.LocalAddr().String(), "kind": "audio", "rtcp_mux": true, "member": m1})
	addLink(t, b, s.ID, map[string]any{"remote": rB.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true, "member": m2})
	rl := addLink(t, a, s.ID, map[string]any{"remote": rA.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true, "member": m3})
	atB, atA := arrivalsOn(rB), arrivalsOn(rA)
	added, err := b.Bus().Conn().SubscribeSync("convene.session." + s.ID + ".link.added")
	if err != nil {
		t.Fatal(err)
	}

	to := &net.UDPAddr{IP: net.ParseIP(sl.Local.Addr), Port: sl.Local.RTPPort}
	seq := uint16(0)
	heard := func(at *arrivals, from uint16) bool {
		at.mu.Lock()
		defer at.mu.Unlock()
		for q := range at.pkts {
			if q > from {
				return true
			}
		}
		return false
	}
	testutil.WaitFor(t, 30*time.Second, "m1's packets through node A on B's and A's receivers", func() bool {
		seq++
		sender.WriteToUDP(rtpPacket(seq), to)
		time.Sleep(5 * time.Millisecond)
		return heard(atB, 0) && heard(atA, 0)
	})

	a.kill9()
	var view sessionJSON
	testutil.WaitUntil(t, 60*time.Second, func() string {
		call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &view)
		moved := 0
		for _, l := range view.Links {
			if (l.ID == sl.ID || l.ID == rl.ID) && l.Local.RTPPort != sl.Local.RTPPort && l.Local.RTPPort != 0 {
				moved++
				if l.ID == sl.ID {
					to = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
				}
			}
		}
		if moved != 2 {
			return fmt.Sprintf("%d of node A's 2 links re-homed on node B: %+v", moved, view.Links)
		}
		return ""
	})
	if want := b.RTPAddr(); to.String() != want {
		t.Errorf("m1's link re-homed at %s, want node B's socket %s", to, want)
	}
	rehomed := map[string]bool{}
	for len(rehomed) < 2 {
		m, err := added.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("link.added for the re-homed links: %v (got %v)", err, rehomed)
		}
		for _, id := range []string{sl.ID, rl.ID} {
			if strings.Contains(string(m.Data), id) && strings.Contains(string(m.Data), b.RTPAddr()[strings.LastIndex(b.RTPAddr(), ":")+1:]) {
				rehomed[id] = true
			}
		}
	}
	after := seq
	testutil.WaitFor(t, 30*time.Second, "m1's packets through node B on both receivers", func() bool {
		seq++
		sender.WriteToUDP(rtpPacket(seq), to)
		time.Sleep(5 * time.Millisecond)
		return heard(atB, after) && heard(atA, after)
	})
}

// rejoinNode is where a member whose node went rejoins, as the web app
// chooses (web/src/move.ts moveTarget): the first of the nodes its
// socket was last told of whose URL it has and that takes its token.
func rejoinNode(alts []capacity.Alternative) string {
	for _, a := range alts {
		if a.TokenValid && strings.HasPrefix(a.URL, "http") {
			return a.URL
		}
	}
	return ""
}

// heardFrom sums the packets c received on the tracks of member.
func heardFrom(c *rtctest.Client, member string) uint64 {
	var n uint64
	for _, r := range c.Received() {
		if strings.HasPrefix(r.Stream, member) {
			n += r.Packets.Load()
		}
	}
	return n
}

// TestWebRTCMemberRejoinsAfterKill9: Ada's browser (a pion client) is
// on node A — a child process — and Bob's on node B, which owns the
// session; they hear each other. Ada's welcome frame names node B as
// where to rejoin. A is killed with SIGKILL: Ada's signalling socket
// drops, and she does what the web app does — dials the node her socket
// named, with the same member token — and Bob and she hear each other
// again through B.
func TestWebRTCMemberRejoinsAfterKill9(t *testing.T) {
	c, a := startClusterWithChild(t, "node-a", "node-b")
	b := c.nodes[0]
	s := createSession(t, b, "rejoin")
	ada, atok := joinMember(t, a, s.ID, "Ada")
	bob, btok := joinMember(t, b, s.ID, "Bob")
	cb := dialRTC(t, b, s.ID, btok, rtctest.Options{Audio: true})
	var ca *rtctest.Client
	testutil.WaitUntil(t, 30*time.Second, func() string { // until A has heard B's heartbeats
		if ca != nil {
			ca.Close()
		}
		ca = dialRTC(t, a, s.ID, atok, rtctest.Options{Audio: true, Moves: 1}) // Ada stays on A, not placed on B
		if rejoinNode(ca.Welcome().Alternatives) != b.URL() {
			return fmt.Sprintf("Ada's welcome names %+v, not node B (%s)", ca.Welcome().Alternatives, b.URL())
		}
		return ""
	})
	alts := ca.Welcome().Alternatives
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for f := range ca.Frames() {
			if f.Type == "nodes" {
				alts = f.Alternatives
			}
		}
	}()
	waitMedia(t, ca, bob, "audio")
	waitMedia(t, cb, ada, "audio")

	a.kill9()
	select {
	case <-dropped:
	case <-time.After(60 * time.Second):
		t.Fatal("Ada's signalling socket to the killed node did not drop")
	}
	to := rejoinNode(alts)
	if to != b.URL() {
		t.Fatalf("after the kill Ada would rejoin on %q (told %+v), want node B %s", to, alts, b.URL())
	}
	ca.Close()
	ca2 := dialRTC(t, apiURL(to), s.ID, atok, rtctest.Options{Audio: true})
	if ca2.Welcome().Member != ada {
		t.Fatalf("rejoined as %q, want Ada (%s)", ca2.Welcome().Member, ada)
	}
	waitMedia(t, ca2, bob, "audio")
	before := heardFrom(cb, ada)
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if n := heardFrom(cb, ada); n < before+50 {
			return fmt.Sprintf("Bob heard %d more of Ada's packets after her rejoin", n-before)
		}
		return ""
	})
}

// apiURL is a node known by its URL alone.
type apiURL string

func (u apiURL) URL() string { return string(u) }

// TestMixerComesBackAfterKill9: node A — a child process — owns a session
// whose two phones-like endpoints hear each other through A's mixer (mixed
// plain RTP links: Ada speaks 440 Hz, Cy listens). A is killed with
// SIGKILL; node B takes the session over, opens both mixed links on its
// socket with a mixer of its own, and Cy hears Ada's tone again, now from
// node B, once Ada sends to her link's new address.
func TestMixerComesBackAfterKill9(t *testing.T) {
	c, a := startClusterWithChild(t, "node-a", "node-b")
	b := c.nodes[0]
	s := createSession(t, a, "mixer failover")
	ada, _ := joinMember(t, a, s.ID, "Ada")
	cy, _ := joinMember(t, a, s.ID, "Cy")
	ear, mouth := udpConn(t), udpConn(t)
	addLink(t, a, s.ID, map[string]any{"remote": ear.LocalAddr().String(), "remote_rtcp": udpConn(t).LocalAddr().String(),
		"kind": "audio", "direction": "recvonly", "member": cy, "mix": "PCMU"})
	spoken := addLink(t, a, s.ID, map[string]any{"remote": mouth.LocalAddr().String(), "kind": "audio",
		"direction": "sendrecv", "member": ada, "mix": "PCMU"})

	// tone sends Ada's 440 Hz to to until the returned stop is called.
	tone := func(to *net.UDPAddr) func() {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); pcmuTone(mouth, to, 440, stop, nil) }()
		return func() { close(stop); <-done }
	}
	// heardTone waits until Cy's ear has heard 25 packets of Ada's tone
	// (not the mixer's silence) from the address from.
	heardTone := func(from string) {
		t.Helper()
		n := 0
		buf := make([]byte, 2048)
		pcm := make([]int16, 2048)
		testutil.WaitUntil(t, 60*time.Second, func() string {
			ear.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			k, src, err := ear.ReadFromUDP(buf)
			if err == nil && k > 12 && src.String() == from {
				audio.DecodeMulaw(pcm[:k-12], buf[12:k])
				var e float64
				for _, v := range pcm[:k-12] {
					e += float64(v) * float64(v)
				}
				if e/float64(k-12) > 1000*1000 { // RMS above 1000: the tone, not silence
					n++
				}
			}
			if n < 25 {
				return fmt.Sprintf("Cy heard %d packets of Ada's tone from %s", n, from)
			}
			return ""
		})
	}
	stop := tone(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: spoken.Local.RTPPort})
	heardTone(fmt.Sprintf("127.0.0.1:%d", spoken.Local.RTPPort))
	stop()

	a.kill9()
	var view sessionJSON
	var to *net.UDPAddr
	testutil.WaitUntil(t, 60*time.Second, func() string {
		call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &view)
		if view.Owner != "node-b" {
			return "the session is owned by " + view.Owner
		}
		for _, l := range view.Links {
			if l.ID == spoken.ID && l.Local.RTPPort != spoken.Local.RTPPort {
				to = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
				return ""
			}
		}
		return fmt.Sprintf("Ada's link is not re-homed on node B: %+v", view.Links)
	})
	stop = tone(to)
	defer stop()
	heardTone(b.RTPAddr())
}

// TestBrowserRejoinsAfterKill9: Ada joins in Chromium (web/e2e/rejoin.mjs,
// playwright-core; fake microphone and camera) through node A — a child
// process — and Bob (pion) through node B. Node C, another child, has the
// most room, so A's nodes name it first. C and then A are killed with
// SIGKILL: the web app's signalling socket drops, it asks C, which does
// not answer, then B, and moves by itself to B as the same member; Bob
// hears Ada again.
func TestBrowserRejoinsAfterKill9(t *testing.T) {
	web := needBrowser(t)
	if os.Getenv(childNodeEnv) != "" {
		t.Skip("in the child")
	}
	c := startCluster(t, "node-b")
	// Ada's browser stays on A, where she joins, rather than being placed
	// on B, the session's owner.
	a := startChildNode(t, c.config(t, "node-a", func(cfg *config.Config) { cfg.WebRTC.PlaceNear = 0 }))
	dead := startChildNode(t, c.config(t, "node-c", func(cfg *config.Config) { cfg.Capacity.PPS = 100 * cfg.Capacity.PPS }))
	b := c.nodes[0]
	s := createSession(t, b, "browser rejoin")
	_, btok := joinMember(t, b, s.ID, "Bob")
	cb := dialRTC(t, b, s.ID, btok, rtctest.Options{Audio: true})
	var jt struct{ Token string }
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/tokens", map[string]string{"role": "participant"}, &jt); code != 201 {
		t.Fatalf("join token: %d", code)
	}
	// A must have heard B's and C's heartbeats and measured both near
	// before Ada's welcome names them: C first (the most room), then B.
	testutil.WaitUntil(t, 30*time.Second, func() string {
		ns := listNodes(t, a)
		measured := map[string]bool{}
		for _, p := range ns["node-a"].Heartbeat.Peers {
			measured[p.Node] = p.RTTSeconds > 0
		}
		for _, id := range []string{"node-b", "node-c"} {
			if e, ok := ns[id]; !ok || e.Stale || !measured[id] {
				return "node A does not list " + id + " with its delay yet"
			}
		}
		return ""
	})
	next := browsePage(t, web, a.URL()+"/join/"+s.ID+"#t="+url.QueryEscape(jt.Token), "Ada", b.URL())
	ada := next("joined")[0]
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if n := heardFrom(cb, ada); n < 50 {
			return fmt.Sprintf("Bob heard %d packets of Ada's through node A", n)
		}
		return ""
	})

	dead.kill9()
	a.kill9()
	again := next("rejoined")
	if again[0] != ada || !strings.HasPrefix(again[1], b.URL()+"/s/"+s.ID) {
		t.Fatalf("the browser rejoined as %v, want Ada (%s) on %s", again, ada, b.URL())
	}
	before := heardFrom(cb, ada)
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if n := heardFrom(cb, ada); n < before+50 {
			return fmt.Sprintf("Bob heard %d more packets of Ada's after she rejoined through node B", n-before)
		}
		return ""
	})
}

// TestDrainSaysGoingAway: a node that drains closes its members'
// signalling sockets with 1001 (going away), so the web app rejoins on
// another node (move.ts rejoinTarget), while a member that leaves on its
// own gets 1000 and stays out.
func TestDrainSaysGoingAway(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	s := createSession(t, b, "drain")
	_, atok := joinMember(t, a, s.ID, "Ada")
	_, ctok := joinMember(t, a, s.ID, "Cy")
	ca := dialRTC(t, a, s.ID, atok, rtctest.Options{Audio: true, Moves: 1}) // they stay on A, not placed on B
	cc := dialRTC(t, a, s.ID, ctok, rtctest.Options{Moves: 1})
	closed := func(cl *rtctest.Client) {
		t.Helper()
		select {
		case <-drained(cl):
		case <-time.After(30 * time.Second):
			t.Fatal("the member's socket did not close")
		}
	}
	if err := cc.Send([]byte(`{"type":"leave"}`)); err != nil {
		t.Fatal(err)
	}
	closed(cc)
	if got := cc.CloseStatus(); got != websocket.StatusNormalClosure {
		t.Errorf("a member that left: close %d, want 1000", got)
	}
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed(ca)
	if got := ca.CloseStatus(); got != websocket.StatusGoingAway {
		t.Errorf("a drained node's member: close %d, want 1001", got)
	}
}

// drained is closed once cl's frames end (its socket closed).
func drained(cl *rtctest.Client) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range cl.Frames() {
		}
		close(done)
	}()
	return done
}

// needBrowser skips a test without Chromium, node and playwright-core
// (fails in CI, where make test-deps installs them) and returns the web
// app's directory.
func needBrowser(t *testing.T) string {
	t.Helper()
	testutil.NeedBinary(t, "chromium")
	testutil.NeedBinary(t, "node")
	web, err := filepath.Abs(filepath.Join("..", "..", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("web/node_modules has no playwright-core (make test-deps)")
		}
		t.Skip("web/node_modules has no playwright-core (make test-deps installs it)")
	}
	if !webui.Built() {
		t.Skip("the web app is not built into this binary (make web)")
	}
	return web
}

// browsePage runs web/e2e/rejoin.mjs: a Chromium page joins through link
// as name and then waits to be on the node at url to by itself. next
// returns the fields of the script's next line, which must start with
// want ("joined <member>", "rejoined <member> <page url>").
func browsePage(t *testing.T, web, link, name, to string) (next func(want string) []string) {
	t.Helper()
	cmd := exec.Command(testutil.NeedBinary(t, "node"), "e2e/rejoin.mjs", link, name, to)
	cmd.Dir, cmd.Stderr = web, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func(want string) []string {
		t.Helper()
		select {
		case l := <-lines:
			f := strings.Fields(l)
			if len(f) < 2 || f[0] != want {
				t.Fatalf("the browser said %q, want %s", l, want)
			}
			return f[1:]
		case <-time.After(3 * time.Minute):
			t.Fatalf("the browser did not say %s", want)
		}
		return nil
	}
}
