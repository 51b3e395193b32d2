package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/rtpdump"
	"github.com/convene/convene/internal/testutil"
)

type recordingJSON struct {
	ID          string     `json:"id"`
	Session     string     `json:"session"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Owner       string     `json:"owner"`
	State       string     `json:"state"`
	EndedAt     *time.Time `json:"ended_at"`
	DurationMS  int64      `json:"duration_ms"`
	SizeBytes   int64      `json:"size_bytes"`
	Streams     int        `json:"streams"`
	Files       []struct {
		File         string `json:"file"`
		SSRC         uint32 `json:"ssrc"`
		Kind         string `json:"kind"`
		RTCPOnly     bool   `json:"rtcp_only"`
		Packets      uint64 `json:"packets"`
		RTCPPackets  uint64 `json:"rtcp_packets"`
		Member       string `json:"member"`
		PayloadTypes []struct {
			PT    uint8  `json:"pt"`
			Codec string `json:"codec"`
		} `json:"payload_types"`
	} `json:"files"`
	Timeline []struct {
		Kind   string `json:"kind"`
		Member string `json:"member"`
	} `json:"timeline"`
}

// joinAs joins a member with a role and returns its ID and member token.
func joinAs(t *testing.T, n *Node, sid, name, role string) (id, tok string) {
	t.Helper()
	jt := joinToken(t, n, sid, role)
	var joined struct {
		Member struct{ ID string }
		Token  struct{ Token string }
	}
	if code := callAs(t, jt, "POST", n.URL()+"/api/v1/sessions/"+sid+"/members", map[string]string{"name": name}, &joined); code != 201 {
		t.Fatalf("join as %s: %d", role, code)
	}
	return joined.Member.ID, joined.Token.Token
}

// callNoAuth does a request without any credential.
func callNoAuth(t *testing.T, method, url string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tee stands between ffmpeg and the node: it takes ffmpeg's RTP and RTCP
// on a port pair of its own and sends each datagram on, unchanged, from
// the link's remote address pair to the node, keeping a copy: what the
// node was sent, to compare the recording with.
type tee struct {
	in, inRTCP   *net.UDPConn
	out, outRTCP *net.UDPConn
	mu           sync.Mutex
	rtp, rtcp    [][]byte
	wg           sync.WaitGroup
}

func newTee(t *testing.T) *tee {
	t.Helper()
	inPort, outPort := freePortPair(t), freePortPair(t)
	listen := func(p int) *net.UDPConn {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadBuffer(4 << 20)
		t.Cleanup(func() { c.Close() })
		return c
	}
	return &tee{in: listen(inPort), inRTCP: listen(inPort + 1), out: listen(outPort), outRTCP: listen(outPort + 1)}
}

// remote is the address the node's link must name.
func (e *tee) remote() string { return e.out.LocalAddr().String() }

// target is where ffmpeg sends (RTCP to its port+1).
func (e *tee) target() string { return e.in.LocalAddr().String() }

// run forwards to the node's link until the sockets are quiet for idle
// after the first datagram.
func (e *tee) run(l linkJSON) {
	rtpTo := &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
	rtcpTo := &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTCPPort}
	fwd := func(in, out *net.UDPConn, to *net.UDPAddr, keep *[][]byte) {
		defer e.wg.Done()
		buf := make([]byte, 2048)
		in.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			n, err := in.Read(buf)
			if err != nil {
				return
			}
			in.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
			e.mu.Lock()
			*keep = append(*keep, append([]byte(nil), buf[:n]...))
			e.mu.Unlock()
			out.WriteTo(buf[:n], to)
		}
	}
	e.wg.Add(2)
	go fwd(e.in, e.out, rtpTo, &e.rtp)
	go fwd(e.inRTCP, e.outRTCP, rtcpTo, &e.rtcp)
}

// readDump reads a recorded stream: its RTP and RTCP packets.
func readDump(t *testing.T, path string) (rtp, rtcp [][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := rtpdump.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := r.Next()
		if err == io.EOF {
			return rtp, rtcp
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.RTCP {
			rtcp = append(rtcp, append([]byte(nil), p.Data...))
		} else {
			rtp = append(rtp, append([]byte(nil), p.Data...))
		}
	}
}

func sameDatagrams(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// TestRecordFFmpeg: ffmpeg sends PCMU audio and VP8 video into a session
// while its chair records it; after the stop each stream's rtpdump file
// holds exactly the RTP packets the node was sent for that track, byte for
// byte and in order (a tee in front of the node keeps a copy), as many as
// the link and the track counted; ffmpeg's RTCP is in the same files; the
// catalog shows size, duration and streams, the time line the members;
// recording.started and .stopped reach NATS. Then who may do what: a
// stranger gets 401, a participant 403 for start, stop, rename and
// delete, the chair cannot delete the operator's recording, and deleting
// its own frees its directory; finishing the session stops a recording.
func TestRecordFFmpeg(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	s := createSession(t, n, "recorded")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	chair, ctok := joinAs(t, n, s.ID, "Chair", "chair")
	pat, ptok := joinAs(t, n, s.ID, "Pat", "participant")

	sub, err := n.Bus().Conn().SubscribeSync("convene.session." + s.ID + ".recording.*")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	audioTee, videoTee := newTee(t), newTee(t)
	al := addLink(t, n, s.ID, map[string]any{"remote": audioTee.remote(), "kind": "audio", "direction": "sendonly"})
	// The video link names its codec: ffmpeg's VP8 goes on dynamic payload
	// type 96, which says nothing by itself.
	vl := addLink(t, n, s.ID, map[string]any{"remote": videoTee.remote(), "kind": "video", "direction": "sendonly", "codec": "VP8/90000"})

	// Who may start.
	if code := callNoAuth(t, "POST", base+"/recordings"); code != 401 {
		t.Errorf("a stranger starts a recording: %d, want 401", code)
	}
	if code := callAs(t, ptok, "POST", base+"/recordings", map[string]string{"title": "mine"}, nil); code != 403 {
		t.Errorf("a participant starts a recording: %d, want 403", code)
	}
	var rec recordingJSON
	if code := callAs(t, ctok, "POST", base+"/recordings", map[string]string{"title": "Weekly review", "description": "ffmpeg's tone and test card"}, &rec); code != 201 {
		t.Fatalf("the chair starts a recording: %d", code)
	}
	if rec.State != "recording" || rec.Owner != chair || rec.Session != s.ID {
		t.Fatalf("started %+v", rec)
	}
	recURL := n.URL() + "/api/v1/recordings/" + rec.ID

	audioTee.run(al)
	videoTee.run(vl)
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re",
		"-f", "lavfi", "-i", "sine=frequency=440:duration=3",
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=3",
		"-map", "0:a", "-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", "rtp://"+audioTee.target(),
		"-map", "1:v", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-f", "rtp", "rtp://"+videoTee.target())
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	audioTee.wg.Wait()
	videoTee.wg.Wait()

	// Floor changes go on the time line.
	if code := call(t, "PUT", base+"/floors/audio", map[string]any{"style": "floor_control", "auto": true}, nil); code != 200 {
		t.Fatalf("floor style: %d", code)
	}
	if code := callAs(t, ptok, "POST", base+"/floors/audio/request", map[string]any{}, nil); code != 200 && code != 201 {
		t.Fatalf("floor request: %d", code)
	}
	if code := callAs(t, ptok, "POST", base+"/floors/audio/release", map[string]any{}, nil); code != 200 && code != 201 {
		t.Fatalf("floor release: %d", code)
	}

	// While it runs a participant reads it but may not stop it.
	if code := callAs(t, ptok, "GET", recURL, nil, nil); code != 200 {
		t.Errorf("a participant reads its session's recording: %d", code)
	}
	if code := callAs(t, ptok, "POST", recURL+"/stop", map[string]any{}, nil); code != 403 {
		t.Errorf("a participant stops the recording: %d, want 403", code)
	}
	var stopped recordingJSON
	if code := callAs(t, ctok, "POST", recURL+"/stop", map[string]any{}, &stopped); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	if stopped.State != "finished" || stopped.EndedAt == nil || stopped.DurationMS < 2500 || stopped.SizeBytes == 0 {
		t.Errorf("stopped: %+v", stopped)
	}

	var got recordingJSON
	if code := call(t, "GET", recURL, nil, &got); code != 200 {
		t.Fatalf("get: %d", code)
	}
	var sess sessionJSON
	call(t, "GET", base, nil, &sess)
	counted := map[string]uint64{}
	for _, l := range sess.Links {
		counted[l.ID] = l.Stats.PacketsIn
	}
	for _, c := range []struct {
		kind string
		tee  *tee
		link linkJSON
	}{{"audio", audioTee, al}, {"video", videoTee, vl}} {
		// One RTP stream per track; ffmpeg sends its first sender report
		// before its first RTP packet, so that report has a file of its own
		// (rtcp_only, same SSRC) and the later ones go with the RTP.
		var file string
		var rtcp [][]byte
		for _, f := range got.Files {
			if f.Kind != c.kind {
				continue
			}
			if !f.RTCPOnly {
				if file != "" {
					t.Errorf("two %s streams: %s and %s", c.kind, file, f.File)
				}
				file = f.File
			}
			_, fr := readDump(t, filepath.Join(dataDir, "recordings", rec.ID, f.File))
			rtcp = append(rtcp, fr...)
		}
		if file == "" {
			t.Fatalf("no %s stream in %+v", c.kind, got.Files)
		}
		rtp, _ := readDump(t, filepath.Join(dataDir, "recordings", rec.ID, file))
		// Its sidecar maps its clock to wall-clock time from the first
		// sender report on, the early one included (playback's sync).
		sc, err := os.ReadFile(filepath.Join(dataDir, "recordings", rec.ID, strings.TrimSuffix(file, ".rtpdump")+".json"))
		if err != nil {
			t.Fatal(err)
		}
		side, err := recorder.ParseSidecar(sc)
		if err != nil {
			t.Fatal(err)
		}
		wantCodec := map[string]string{"audio": "audio/PCMU", "video": "video/VP8"}[c.kind]
		if len(side.PayloadTypes) != 1 || side.PayloadTypes[0].Codec != wantCodec {
			t.Errorf("%s: the sidecar's payload types %+v, want one, %s", c.kind, side.PayloadTypes, wantCodec)
		}
		if srs := countSRs(c.tee.rtcp); len(side.SenderReports) != srs || srs == 0 {
			t.Errorf("%s: the sidecar has %d sender reports, ffmpeg sent %d", c.kind, len(side.SenderReports), srs)
		}
		sent := c.tee.rtp
		if len(sent) < 40 {
			t.Fatalf("ffmpeg sent only %d %s packets", len(sent), c.kind)
		}
		if !sameDatagrams(rtp, sent) {
			t.Errorf("%s: the file holds %d RTP packets, the node was sent %d; not the same bytes in the same order", c.kind, len(rtp), len(sent))
		}
		if counted[c.link.ID] != uint64(len(rtp)) {
			t.Errorf("%s: the link counted %d packets in, the file holds %d", c.kind, counted[c.link.ID], len(rtp))
		}
		// Every RTCP packet ffmpeg sent for this stream is in its files.
		if !sameDatagrams(rtcp, c.tee.rtcp) {
			t.Errorf("%s: the file holds %d RTCP packets, the node was sent %d", c.kind, len(rtcp), len(c.tee.rtcp))
		}
		t.Logf("%s: %d RTP and %d RTCP packets recorded as sent", c.kind, len(rtp), len(rtcp))
	}
	if got.Streams != len(got.Files) || got.Streams < 2 || got.State != "finished" || got.SizeBytes != stopped.SizeBytes {
		t.Errorf("streams %d, files %d, %+v", got.Streams, len(got.Files), got)
	}
	var joined, floor []string
	for _, e := range got.Timeline {
		switch e.Kind {
		case "member_joined":
			joined = append(joined, e.Member)
		case "floor_granted", "floor_released":
			floor = append(floor, e.Kind+" "+e.Member)
		}
	}
	if want := "floor_granted " + pat + ",floor_released " + pat; strings.Join(floor, ",") != want {
		t.Errorf("the time line's floor events %v, want %s", floor, want)
	}
	sort.Strings(joined)
	want := []string{chair, pat}
	sort.Strings(want)
	if strings.Join(joined, " ") != strings.Join(want, " ") {
		t.Errorf("the time line's members %v, want the two present at the start %v", joined, want)
	}
	if len(got.Timeline) < 2 || got.Timeline[0].Kind != "recording_started" || got.Timeline[len(got.Timeline)-1].Kind != "recording_stopped" {
		t.Errorf("time line %+v", got.Timeline)
	}

	// The events went out on NATS.
	for _, want := range []string{"recording.started", "recording.stopped"} {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if !strings.HasSuffix(m.Subject, want) || !strings.Contains(string(m.Data), rec.ID) {
			t.Errorf("NATS: %s %s, want %s of %s", m.Subject, m.Data, want, rec.ID)
		}
	}

	// The catalog lists and finds it.
	var list struct{ Recordings []recordingJSON }
	if code := call(t, "GET", n.URL()+"/api/v1/recordings?q=weekly", nil, &list); code != 200 || len(list.Recordings) != 1 ||
		list.Recordings[0].ID != rec.ID || list.Recordings[0].SizeBytes != stopped.SizeBytes || list.Recordings[0].Streams != got.Streams {
		t.Errorf("search: %d %+v", code, list.Recordings)
	}
	if code := callAs(t, ptok, "GET", n.URL()+"/api/v1/recordings", nil, &list); code != 200 || len(list.Recordings) != 1 {
		t.Errorf("a participant lists its session's recordings: %d %+v", code, list.Recordings)
	}

	// Strangers, participants and another owner's chair.
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		if code := callNoAuth(t, m, recURL); code != 401 {
			t.Errorf("a stranger's %s: %d, want 401", m, code)
		}
	}
	if code := callNoAuth(t, "GET", n.URL()+"/api/v1/recordings"); code != 401 {
		t.Errorf("a stranger lists recordings: %d, want 401", code)
	}
	if code := callAs(t, ptok, "PATCH", recURL, map[string]string{"title": "hijacked"}, nil); code != 403 {
		t.Errorf("a participant renames the chair's recording: %d, want 403", code)
	}
	if code := callAs(t, ptok, "DELETE", recURL, nil, nil); code != 403 {
		t.Errorf("a participant deletes the chair's recording: %d, want 403", code)
	}
	var renamed recordingJSON
	if code := callAs(t, ctok, "PATCH", recURL, map[string]string{"title": "Weekly review (final)"}, &renamed); code != 200 ||
		renamed.Title != "Weekly review (final)" || renamed.Description != "ffmpeg's tone and test card" {
		t.Errorf("the owner renames: %d %+v", code, renamed)
	}
	var opRec recordingJSON
	if code := call(t, "POST", base+"/recordings", map[string]string{"title": "operator's"}, &opRec); code != 201 || opRec.Owner != "operator" {
		t.Fatalf("the operator starts a recording: %d %+v", code, opRec)
	}
	if code := callAs(t, ctok, "DELETE", n.URL()+"/api/v1/recordings/"+opRec.ID, nil, nil); code != 403 {
		t.Errorf("the chair deletes the operator's recording: %d, want 403", code)
	}
	// Another session's token sees nothing of it.
	other := createSession(t, n, "other")
	_, otok := joinAs(t, n, other.ID, "Olga", "chair")
	if code := callAs(t, otok, "GET", recURL, nil, nil); code != 404 {
		t.Errorf("another session's chair reads the recording: %d, want 404", code)
	}
	if code := callAs(t, ctok, "DELETE", recURL, nil, nil); code != 204 {
		t.Errorf("the owner deletes its recording: %d", code)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "recordings", rec.ID)); !os.IsNotExist(err) {
		t.Errorf("the deleted recording's directory: %v", err)
	}
	if code := call(t, "GET", recURL, nil, nil); code != 404 {
		t.Errorf("the deleted recording: %d, want 404", code)
	}

	// Finishing the session stops the operator's recording.
	if code := call(t, "DELETE", base, nil, nil); code != 200 {
		t.Fatalf("end session: %d", code)
	}
	testutil.WaitFor(t, 5*time.Second, "the session's end to stop its recording", func() bool {
		var r recordingJSON
		call(t, "GET", n.URL()+"/api/v1/recordings/"+opRec.ID, nil, &r)
		return r.State == "finished"
	})
}

// TestRecordingAdmission: with a recording capacity below one audio
// track's estimate a recording is refused with 503, a reason and
// Retry-After, and counted.
func TestRecordingAdmission(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Recording.CapacityMbps = 0.1 // below 128 kb/s
	n := startNode(t, cfg)
	s := createSession(t, n, "too big")
	addLink(t, n, s.ID, map[string]any{"remote": udpConn(t).LocalAddr().String(), "kind": "audio", "direction": "sendonly"})
	req, _ := http.NewRequest("POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", strings.NewReader(`{"title":"x"}`))
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || body.Error.Code != "recording_capacity" ||
		!strings.Contains(body.Error.Message, "0.13 Mb/s") {
		t.Errorf("%d Retry-After %q %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	t.Log(body.Error.Message)
	mr, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	metrics, _ := io.ReadAll(mr.Body)
	if !strings.Contains(string(metrics), `convene_recording_refused_total{reason="capacity"} 1`) {
		t.Error("the refusal is not counted")
	}
}

// crashEnv names the data dir of TestRecordingCrashChild, which records and
// is killed.
const crashEnv = "CONVENE_NODE_RECORDING_CHILD"

// TestRecordingCrashChild is the child of TestRecordingSurvivesKill9: a node
// with a session, a link and a running recording; it prints the link's port
// and the recording's ID and waits to be killed.
func TestRecordingCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the child of TestRecordingSurvivesKill9")
	}
	n := startNode(t, testConfig(t, dir))
	s := createSession(t, n, "crash")
	src := os.Getenv(crashEnv + "_SRC")
	l := addLink(t, n, s.ID, map[string]any{"remote": src, "kind": "audio", "direction": "sendonly"})
	var rec recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "crash"}, &rec); code != 201 {
		t.Fatalf("start: %d", code)
	}
	fmt.Printf("ready %d %s\n", l.Local.RTPPort, rec.ID)
	time.Sleep(60 * time.Second)
	os.Exit(3) // never drain: the parent kills us first
}

// TestRecordingSurvivesKill9: a node is killed with SIGKILL while it
// records; started again on the same data dir it repairs the recording and
// the catalog shows it interrupted, with every packet sent more than a
// second before the kill readable.
func TestRecordingSurvivesKill9(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	dataDir := t.TempDir()
	src := udpConn(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecordingCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dataDir, crashEnv+"_SRC="+src.LocalAddr().String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var port int
	var rid string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "ready %d %s", &port, &rid); err == nil {
			break
		}
	}
	if rid == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child did not start recording")
	}
	go io.Copy(io.Discard, out)
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	const sent = 100
	for i := 0; i < sent; i++ {
		b := make([]byte, 172)
		b[0], b[1], b[2], b[3] = 0x80, 0, byte(i>>8), byte(i)
		b[8], b[11] = 0x12, 0x34 // SSRC
		if _, err := src.WriteTo(b, to); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // more than a second: on disk
	cmd.Process.Kill()
	cmd.Wait()

	cfg := testConfig(t, dataDir)
	cfg.Recording.CapacityMbps = 0 // and the start-up disk probe runs
	n := startNode(t, cfg)
	var got recordingJSON
	if code := call(t, "GET", n.URL()+"/api/v1/recordings/"+rid, nil, &got); code != 200 {
		t.Fatalf("get after restart: %d", code)
	}
	if got.State != "interrupted" || got.Streams != 1 || got.SizeBytes == 0 || got.EndedAt == nil || len(got.Files) != 1 {
		t.Fatalf("after restart: %+v", got)
	}
	rtp, _ := readDump(t, filepath.Join(dataDir, "recordings", rid, got.Files[0].File))
	if len(rtp) != sent || got.Files[0].Packets != sent {
		t.Errorf("%d packets readable (sidecar %d), want %d", len(rtp), got.Files[0].Packets, sent)
	}
	seqs := make([]int, len(rtp))
	for i, p := range rtp {
		seqs[i] = int(p[2])<<8 | int(p[3])
	}
	if !sort.IntsAreSorted(seqs) {
		t.Errorf("out of order: %v", seqs)
	}
}

// TestRecordingQuota: with a 1 MB quota, an owner whose recordings take
// more starts no new one (507), another owner does, and deleting the
// recording frees the owner's quota.
func TestRecordingQuota(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Recording.QuotaMB = 1
	n := startNode(t, cfg)
	s := createSession(t, n, "quota")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	src := udpConn(t)
	l := addLink(t, n, s.ID, map[string]any{"remote": src.LocalAddr().String(), "kind": "video", "direction": "sendonly"})
	var first recordingJSON
	if code := call(t, "POST", base+"/recordings", map[string]string{"title": "big"}, &first); code != 201 {
		t.Fatalf("start: %d", code)
	}
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.Local.RTPPort}
	for i := 0; i < 1000; i++ { // 1.2 MB
		b := make([]byte, 1200)
		b[0], b[1], b[2], b[3] = 0x80, 96, byte(i>>8), byte(i)
		b[11] = 9
		src.WriteTo(b, to)
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "the link to take the packets", func() bool {
		var sess sessionJSON
		call(t, "GET", base, nil, &sess)
		return len(sess.Links) == 1 && sess.Links[0].Stats.PacketsIn == 1000
	})
	var stopped recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+first.ID+"/stop", map[string]any{}, &stopped); code != 200 || stopped.SizeBytes < 1<<20 {
		t.Fatalf("stop: %d, %d bytes", code, stopped.SizeBytes)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if code := call(t, "POST", base+"/recordings", map[string]string{"title": "more"}, &body); code != 507 || body.Error.Code != "recording_quota" {
		t.Errorf("over the quota: %d %+v, want 507 recording_quota", code, body)
	}
	t.Log(body.Error.Message)
	_, ctok := joinAs(t, n, s.ID, "Chair", "chair")
	var chairs recordingJSON
	if code := callAs(t, ctok, "POST", base+"/recordings", map[string]string{"title": "the chair's"}, &chairs); code != 201 {
		t.Errorf("another owner: %d", code)
	}
	if code := call(t, "DELETE", n.URL()+"/api/v1/recordings/"+first.ID, nil, nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if code := call(t, "POST", base+"/recordings", map[string]string{"title": "again"}, nil); code != 201 {
		t.Errorf("after deleting: %d, want 201", code)
	}
}

// TestRecordWebRTC: a WebRTC member's audio and video (a pion client, as a
// browser sends them) are recorded after SRTP is removed: plain RTP of the
// member's SSRCs, Opus and VP8 named in the sidecars, the member on each
// stream, no more packets than the node's tracks counted.
func TestRecordWebRTC(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	s := createSession(t, n, "webrtc recorded")
	ada, atok := joinMember(t, n, s.ID, "Ada")
	var rec recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "browser"}, &rec); code != 201 {
		t.Fatalf("start: %d", code)
	}
	dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})
	var sess sessionJSON
	testutil.WaitFor(t, 15*time.Second, "Ada's tracks to carry 100 packets each", func() bool {
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		enough := 0
		for _, tr := range sess.Tracks {
			if tr.Packets >= 100 {
				enough++
			}
		}
		return enough >= 2
	})
	var got recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/stop", map[string]any{}, nil); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
	var total uint64
	for _, tr := range sess.Tracks {
		total += tr.Packets
	}
	call(t, "GET", n.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
	codecs := map[string]string{}
	var recorded uint64
	for _, f := range got.Files {
		if f.RTCPOnly {
			continue
		}
		if f.Member != ada {
			t.Errorf("%s: member %q, want %s", f.File, f.Member, ada)
		}
		rtp, _ := readDump(t, filepath.Join(dataDir, "recordings", rec.ID, f.File))
		for _, p := range rtp {
			if p[0]>>6 != 2 || uint32(p[8])<<24|uint32(p[9])<<16|uint32(p[10])<<8|uint32(p[11]) != f.SSRC {
				t.Fatalf("%s: not plain RTP of SSRC %x: % x", f.File, f.SSRC, p[:12])
			}
		}
		if uint64(len(rtp)) != f.Packets || f.Packets < 50 {
			t.Errorf("%s: %d packets in the file, sidecar %d", f.File, len(rtp), f.Packets)
		}
		recorded += f.Packets
		for _, pt := range f.PayloadTypes {
			codecs[f.Kind] = strings.ToLower(pt.Codec)
		}
	}
	if codecs["audio"] != "audio/opus" || codecs["video"] != "video/vp8" {
		t.Errorf("codecs %v, want audio/opus and video/vp8", codecs)
	}
	if recorded > total {
		t.Errorf("%d packets recorded, the tracks counted %d", recorded, total)
	}
	t.Logf("%d of the tracks' %d packets recorded (the rest came after the stop)", recorded, total)
}

// countSRs counts the RTCP compound packets that begin with a sender
// report (ffmpeg's each do).
func countSRs(rtcp [][]byte) int {
	n := 0
	for _, p := range rtcp {
		if len(p) >= 28 && p[1] == 200 {
			n++
		}
	}
	return n
}
