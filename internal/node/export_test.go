package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// recordFFmpeg records 3 s of ffmpeg's tone (PCMU) and test card (VP8)
// sent into a session, and returns the stopped recording.
func recordFFmpeg(t *testing.T, n *Node, dataDir string) (sid string, rec recordingJSON) {
	t.Helper()
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	s := createSession(t, n, "exported")
	audioTee, videoTee := newTee(t), newTee(t)
	al := addLink(t, n, s.ID, map[string]any{"remote": audioTee.remote(), "kind": "audio", "direction": "sendonly"})
	vl := addLink(t, n, s.ID, map[string]any{"remote": videoTee.remote(), "kind": "video", "direction": "sendonly"})
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "export me"}, &rec); code != 201 {
		t.Fatalf("start recording: %d", code)
	}
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
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/stop", map[string]any{}, &rec); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	return s.ID, rec
}

type probed struct {
	Streams []struct {
		CodecName string `json:"codec_name"`
		CodecType string `json:"codec_type"`
		Width     int    `json:"width"`
	} `json:"streams"`
	Format struct {
		Duration string `json:"duration"`
	} `json:"format"`
}

// download GETs an export as the operator into a file named for format.
func download(t *testing.T, url, format string) (path string, size int64) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "out."+format)
	f, _ := os.Create(path)
	size, err = io.Copy(f, resp.Body)
	resp.Body.Close()
	f.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d, %v", format, resp.StatusCode, err)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.FormatInt(size, 10) {
		t.Errorf("%s: Content-Length %s, got %d bytes", format, cl, size)
	}
	return path, size
}

// probe reads a file's streams and duration with ffprobe.
func probe(t *testing.T, ffprobe, path string) probed {
	t.Helper()
	out, err := exec.Command(ffprobe, "-v", "error", "-print_format", "json", "-show_streams", "-show_format", path).Output()
	if err != nil {
		t.Fatalf("%s: ffprobe: %v", path, err)
	}
	var p probed
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeAll has ffmpeg decode a file to its end, and returns what it
// said (nothing when every frame decoded). Frames keep the file's time
// base (-enc_time_base -1): by default the null sink counts 15 frames a
// second and rounds each time to a 15th, and a millisecond time line of
// 66.67 ms frames lands two on one count every third frame when the
// video's start falls on a half (a WebM ffmpeg itself writes does too).
func decodeAll(ffmpeg, path string) ([]byte, error) {
	return exec.Command(ffmpeg, "-v", "error", "-xerror", "-i", path, "-enc_time_base", "-1", "-f", "null", "-").CombinedOutput()
}

// TestExportFFmpeg: a recording of ffmpeg's PCMU tone and VP8 test card
// exports as WebM (one VP8 and one Opus stream: the G.711 is transcoded),
// Ogg/Opus and WAV; ffprobe reads each with a duration within 10% of the
// recording's, and ffmpeg decodes each to the end without an error. A
// participant may not export (403), a format that is not known is 400,
// and the streams were placed within 100 ms of each other (ffmpeg starts
// both at once).
func TestExportFFmpeg(t *testing.T) {
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	sid, rec := recordFFmpeg(t, n, dataDir)
	url := n.URL() + "/api/v1/recordings/" + rec.ID + "/export?format="

	_, ptok := joinAs(t, n, sid, "Pat", "participant")
	if code := callAs(t, ptok, "GET", url+"webm", nil, nil); code != 403 {
		t.Errorf("a participant exports: %d, want 403", code)
	}
	if code := call(t, "GET", url+"mp4", nil, nil); code != 400 {
		t.Errorf("format mp4: %d, want 400", code)
	}

	x, err := export.Open(filepath.Join(dataDir, "recordings", rec.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Audio) != 1 || len(x.Video) != 1 {
		b, _ := exec.Command("sh", "-c", "cat "+filepath.Join(dataDir, "recordings", rec.ID)+"/*.json").Output()
		t.Fatalf("%d audio and %d video streams: %s", len(x.Audio), len(x.Video), b)
	}
	a, v := x.Audio[0], x.Video[0]
	t.Logf("audio starts at %v (%s), video at %v (%s); %v in all", a.Start, a.Aligned, v.Start, v.Aligned, x.Duration)
	if d := a.Start - v.Start; d > 100e6 || d < -100e6 {
		t.Errorf("audio and video %v apart", d)
	}

	for _, c := range []struct {
		format string
		codecs []string
	}{{"webm", []string{"vp8", "opus"}}, {"ogg", []string{"opus"}}, {"wav", []string{"pcm_s16le"}}} {
		path, size := download(t, url+c.format, c.format)
		p := probe(t, ffprobe, path)
		var got []string
		for _, s := range p.Streams {
			got = append(got, s.CodecName)
		}
		if len(got) != len(c.codecs) {
			t.Errorf("%s: streams %v, want %v", c.format, got, c.codecs)
		}
		for i := range got {
			if i < len(c.codecs) && got[i] != c.codecs[i] {
				t.Errorf("%s: streams %v, want %v", c.format, got, c.codecs)
			}
		}
		dur, _ := strconv.ParseFloat(p.Format.Duration, 64)
		want := float64(rec.DurationMS) / 1000
		if dur < 0.9*want || dur > 1.1*want {
			t.Errorf("%s: duration %.3f s, the recording's %.3f s", c.format, dur, want)
		}
		if b, err := decodeAll(ffmpeg, path); err != nil || len(b) > 0 {
			t.Errorf("%s: ffmpeg decodes with %v: %s", c.format, err, b)
		}
		t.Logf("%s: %d bytes, %v, %.3f s (recording %.3f s)", c.format, size, got, dur, want)
	}
}

// TestPlayIntoSession: the chair plays a recording of ffmpeg's PCMU tone
// and VP8 test card back into its session, where a plain RTP receiver
// link gets every recorded audio packet: new SSRC, sequence numbers by
// one, the recorded gaps; a pause holds them back; a participant may
// read the playback but not control it; at the end the playback's member
// has left and the playback is gone.
func TestPlayIntoSession(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	sid, rec := recordFFmpeg(t, n, dataDir)
	_, ctok := joinAs(t, n, sid, "Chair", "chair")
	_, ptok := joinAs(t, n, sid, "Pat", "participant")
	recorded, _ := readDump(t, filepath.Join(dataDir, "recordings", rec.ID, audioFile(t, n, rec.ID)))

	rx := listenRTP(t)
	addLink(t, n, sid, map[string]any{"remote": rx.addr(), "kind": "audio", "direction": "recvonly"})
	count := func() int { return len(rx.packets(false)) }

	url := n.URL() + "/api/v1/recordings/" + rec.ID + "/play"
	if code := callAs(t, ptok, "POST", url, map[string]any{"session": sid}, nil); code != 403 {
		t.Errorf("a participant plays: %d, want 403", code)
	}
	if code := callAs(t, ctok, "POST", url, map[string]any{"session": sid, "speed": 3}, nil); code != 400 {
		t.Errorf("speed 3: %d, want 400", code)
	}
	var pb struct {
		ID, Member, State string
		PositionMS        int64  `json:"position_ms"`
		Sent              uint64 `json:"packets_sent"`
	}
	if code := callAs(t, ctok, "POST", url, map[string]any{"session": sid}, &pb); code != 201 || pb.State != "playing" {
		t.Fatalf("the chair plays: %d %+v", code, pb)
	}
	pbURL := n.URL() + "/api/v1/playbacks/" + pb.ID
	if !hasMember(t, n, sid, pb.Member) {
		t.Errorf("the playback's member %s is not in the session", pb.Member)
	}

	testutil.WaitFor(t, 3*time.Second, "20 packets played", func() bool { return count() > 20 })
	if code := callAs(t, ptok, "POST", pbURL+"/control", map[string]any{"action": "pause"}, nil); code != 403 {
		t.Errorf("a participant pauses: %d, want 403", code)
	}
	if code := callAs(t, ptok, "GET", pbURL, nil, &pb); code != 200 {
		t.Errorf("a participant reads the playback: %d", code)
	}
	if code := callAs(t, ctok, "POST", pbURL+"/control", map[string]any{"action": "pause"}, &pb); code != 200 || pb.State != "paused" {
		t.Fatalf("pause: %d %+v", code, pb)
	}
	time.Sleep(100 * time.Millisecond) // what was on its way
	before := count()
	time.Sleep(500 * time.Millisecond)
	if c := count(); c != before {
		t.Errorf("%d packets arrived while paused", c-before)
	}
	if code := callAs(t, ctok, "POST", pbURL+"/control", map[string]any{"action": "resume"}, &pb); code != 200 || pb.State != "playing" {
		t.Fatalf("resume: %d %+v", code, pb)
	}
	testutil.WaitFor(t, 10*time.Second, "the playback's end", func() bool {
		return call(t, "GET", pbURL, nil, nil) == 404
	})
	time.Sleep(200 * time.Millisecond)
	heard := rx.packets(false)
	if len(heard) != len(recorded) {
		t.Fatalf("the receiver got %d packets, the recording holds %d", len(heard), len(recorded))
	}
	for i, p := range heard {
		r := recorded[i]
		if string(p[12:]) != string(r[12:]) {
			t.Fatalf("packet %d: payload differs", i)
		}
		if binary.BigEndian.Uint32(p[8:]) == binary.BigEndian.Uint32(r[8:]) {
			t.Errorf("packet %d keeps the recorded SSRC", i)
		}
		if i > 0 && binary.BigEndian.Uint16(p[2:]) != binary.BigEndian.Uint16(heard[i-1][2:])+1 {
			t.Fatalf("packet %d: sequence %d after %d", i, binary.BigEndian.Uint16(p[2:]), binary.BigEndian.Uint16(heard[i-1][2:]))
		}
	}
	if hasMember(t, n, sid, pb.Member) {
		t.Errorf("the playback's member %s is still in the session", pb.Member)
	}
}

// rtpRx is a plain RTP receiver on loopback that keeps what it hears.
type rtpRx struct {
	c    *net.UDPConn
	mu   sync.Mutex
	pkts [][]byte
}

func listenRTP(t *testing.T) *rtpRx {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rx := &rtpRx{c: c}
	go func() {
		buf := make([]byte, 2048)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			rx.mu.Lock()
			rx.pkts = append(rx.pkts, append([]byte(nil), buf[:k]...))
			rx.mu.Unlock()
		}
	}()
	return rx
}

func (rx *rtpRx) addr() string { return rx.c.LocalAddr().String() }

// packets returns what arrived so far; take also forgets it.
func (rx *rtpRx) packets(take bool) [][]byte {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	out := rx.pkts
	if take {
		rx.pkts = nil
	} else {
		out = append([][]byte(nil), out...)
	}
	return out
}

// audioFile is the recording's audio RTP stream file.
func audioFile(t *testing.T, n *Node, rid string) string {
	t.Helper()
	var rec recordingJSON
	call(t, "GET", n.URL()+"/api/v1/recordings/"+rid, nil, &rec)
	for _, f := range rec.Files {
		if f.Kind == "audio" && !f.RTCPOnly {
			return f.File
		}
	}
	t.Fatalf("no audio stream in %+v", rec.Files)
	return ""
}

// hasMember reports whether a session has a member.
func hasMember(t *testing.T, n *Node, sid, member string) bool {
	t.Helper()
	var ms struct {
		Members []struct{ ID string } `json:"members"`
	}
	call(t, "GET", n.URL()+"/api/v1/sessions/"+sid+"/members", nil, &ms)
	for _, m := range ms.Members {
		if m.ID == member {
			return true
		}
	}
	return false
}

// TestPlayToWHEP: a WHEP viewer pinned to a playback's member receives
// the recording's audio and video (the PCMU as PCMU or Opus, the VP8 as
// it was recorded) through the existing WHEP path. The playback is paused
// while the viewer connects; stopped, its member leaves; a playback whose
// session finishes stops.
func TestPlayToWHEP(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	sid, rec := recordFFmpeg(t, n, dataDir)
	var pb struct{ ID, Member, State string }
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/play", map[string]any{"session": sid}, &pb); code != 201 {
		t.Fatalf("play: %d", code)
	}
	pbURL := n.URL() + "/api/v1/playbacks/" + pb.ID
	if code := call(t, "POST", pbURL+"/control", map[string]any{"action": "pause"}, &pb); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	view, vres, err := rtctest.WHEP(ctx, n.URL(), sid, joinToken(t, n, sid, "listener"), "member="+pb.Member)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	defer vres.Delete(context.Background())
	if code := call(t, "POST", pbURL+"/control", map[string]any{"action": "resume"}, &pb); code != 200 || pb.State != "playing" {
		t.Fatalf("resume: %d %+v", code, pb)
	}
	waitMedia(t, view, "", "audio", "video")
	for _, r := range view.Received() {
		t.Logf("the WHEP viewer received %s %s: %d packets", r.Kind, r.Codec, r.Packets.Load())
		// The answer names the pinned track's codec where the viewer
		// offered it (PCMU), else Opus through the transcoder.
		if r.Kind == "video" && !strings.EqualFold(r.Codec, "video/VP8") ||
			r.Kind == "audio" && !strings.EqualFold(r.Codec, "audio/opus") && !strings.EqualFold(r.Codec, "audio/PCMU") {
			t.Errorf("%s as %s", r.Kind, r.Codec)
		}
	}
	if code := call(t, "DELETE", pbURL, nil, &pb); code != 200 || pb.State != "stopped" {
		t.Errorf("stop: %d %+v", code, pb)
	}
	testutil.WaitFor(t, 5*time.Second, "the stopped playback's member to leave", func() bool { return !hasMember(t, n, sid, pb.Member) })

	// A playback whose session finishes stops with it.
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/play", map[string]any{"session": sid, "speed": 0.5}, &pb); code != 201 {
		t.Fatalf("play again: %d", code)
	}
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+sid, nil, nil); code != 200 && code != 204 {
		t.Fatalf("finish the session: %d", code)
	}
	testutil.WaitFor(t, 5*time.Second, "the playback to stop with its session", func() bool {
		return call(t, "GET", n.URL()+"/api/v1/playbacks/"+pb.ID, nil, nil) == 404
	})
}

// TestPlaySpeedAndSeekThroughTheAPI: a recording of ffmpeg's 3 s 440 Hz
// tone played into its session at 2× reaches a plain RTP receiver as about
// 1.5 s of 20 ms packets, still at 440 Hz (stretched, not sped up like a
// tape); a second playback at 0.5×, sought to 2 s, gives about 2 s of it.
func TestPlaySpeedAndSeekThroughTheAPI(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	sid, rec := recordFFmpeg(t, n, dataDir)
	rx := listenRTP(t)
	addLink(t, n, sid, map[string]any{"remote": rx.addr(), "kind": "audio", "direction": "recvonly"})
	take := func() [][]byte { return rx.packets(true) }
	type playback struct {
		ID, State  string
		Speed      float64 `json:"speed"`
		PositionMS int64   `json:"position_ms"`
	}
	play := func(body map[string]any) playback {
		var pb playback
		if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/play", body, &pb); code != 201 {
			t.Fatalf("play %v: %d", body, code)
		}
		return pb
	}
	ended := func(pb playback) {
		testutil.WaitFor(t, 15*time.Second, "the playback's end", func() bool {
			return call(t, "GET", n.URL()+"/api/v1/playbacks/"+pb.ID, nil, nil) == 404
		})
		time.Sleep(200 * time.Millisecond)
	}
	check := func(what string, pkts [][]byte, want time.Duration) {
		t.Helper()
		var pcm []int16
		for i, p := range pkts {
			if i > 0 && (binary.BigEndian.Uint16(p[2:]) != binary.BigEndian.Uint16(pkts[i-1][2:])+1 ||
				binary.BigEndian.Uint32(p[4:])-binary.BigEndian.Uint32(pkts[i-1][4:]) != 160) {
				t.Fatalf("%s: packet %d does not follow the one before", what, i)
			}
			for _, b := range p[12:] {
				pcm = append(pcm, audio.MulawDecode(b))
			}
		}
		got := time.Duration(len(pcm)) * time.Second / 8000
		share := audio.WindowedToneShare(pcm[len(pcm)/4:3*len(pcm)/4], 440, 8000)
		t.Logf("%s: %d packets, %v of audio, %.2f of it at 440 Hz", what, len(pkts), got, share)
		if got < want*85/100 || got > want*115/100 {
			t.Errorf("%s: %v of audio, want about %v", what, got, want)
		}
		if share < 0.8 {
			t.Errorf("%s: %.2f of the energy at 440 Hz; the tone lost its pitch", what, share)
		}
	}

	pb := play(map[string]any{"session": sid, "speed": 2})
	if pb.Speed != 2 {
		t.Errorf("speed %v", pb.Speed)
	}
	ended(pb)
	check("2×", take(), 1500*time.Millisecond)

	pb = play(map[string]any{"session": sid, "speed": 0.5})
	ctl := n.URL() + "/api/v1/playbacks/" + pb.ID + "/control"
	if code := call(t, "POST", ctl, map[string]any{"action": "seek", "position_ms": 5000}, nil); code != 400 {
		t.Errorf("a seek past the end: %d, want 400", code)
	}
	if code := call(t, "POST", ctl, map[string]any{"action": "seek", "position_ms": 2000}, &pb); code != 200 || pb.PositionMS < 2000 {
		t.Fatalf("seek: %d %+v", code, pb)
	}
	if code := call(t, "POST", ctl, map[string]any{"action": "speed", "speed": 3}, nil); code != 400 {
		t.Errorf("speed 3: %d, want 400", code)
	}
	ended(pb)
	pkts := take()
	// The few packets sent before the seek came first: the seek
	// starts a new run of timestamps (moved on by the wall time).
	from := 0
	for i := 1; i < min(len(pkts), 15); i++ {
		if binary.BigEndian.Uint32(pkts[i][4:])-binary.BigEndian.Uint32(pkts[i-1][4:]) != 160 {
			from = i
			break
		}
	}
	check("seek to 2 s, 0.5×", pkts[from:], 2*time.Second)
}

// TestExportShowsTheComposite: a session recorded while a composite of
// its cameras runs exports to one WebM whose picture is the composite's
// (480×270 here; the camera is 320×240): the file shows everyone.
func TestExportShowsTheComposite(t *testing.T) {
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	s := createSession(t, n, "one file")
	sendFFmpeg(t, n, s.ID, 40*time.Second)
	curl := n.URL() + "/api/v1/sessions/" + s.ID + "/composites"
	var c compositeJSON
	if code := call(t, "POST", curl, map[string]any{"layout": "grid2", "width": 480, "height": 270, "fps": 10}, &c); code != 201 {
		t.Fatalf("start a composite: %d", code)
	}
	testutil.WaitFor(t, 30*time.Second, "the composite's frames", func() bool {
		var l struct{ Composites []compositeJSON }
		call(t, "GET", curl, nil, &l)
		return len(l.Composites) == 1 && l.Composites[0].Frames > 10
	})
	var rec recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "everyone"}, &rec); code != 201 {
		t.Fatalf("start recording: %d", code)
	}
	time.Sleep(5 * time.Second)
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/stop", map[string]any{}, &rec); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	path, size := download(t, n.URL()+"/api/v1/recordings/"+rec.ID+"/export?format=webm", "webm")
	p := probe(t, ffprobe, path)
	width := 0
	for _, st := range p.Streams {
		if st.CodecType == "video" {
			width = st.Width
		}
	}
	t.Logf("the WebM: %d bytes, %+v", size, p.Streams)
	if width != 480 {
		b, _ := exec.Command("sh", "-c", "cat "+filepath.Join(dataDir, "recordings", rec.ID)+"/*.json").Output()
		t.Errorf("the WebM's picture is %d wide, want the composite's 480; the recording: %s", width, b)
	}
}
