package node

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media/h264writer"
	"github.com/pion/webrtc/v4/pkg/media/ivfwriter"

	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
	"github.com/convene/convene/internal/vtranscode"
)

// sendCamera makes ffmpeg send its test card (320×240, 15 fps, a keyframe
// a second) in codec ("VP8/90000" or "H264/90000") into a session through
// a plain RTP link that names the codec.
func sendCamera(t *testing.T, n *Node, sid, codec string) linkJSON {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	tee := newTee(t)
	l := addLink(t, n, sid, map[string]any{"remote": tee.remote(), "kind": "video", "direction": "sendonly", "codec": codec})
	tee.run(l)
	enc := []string{"-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-g", "15"}
	if strings.HasPrefix(codec, "H264") {
		enc = []string{"-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-profile:v", "baseline",
			"-pix_fmt", "yuv420p", "-b:v", "300k", "-g", "15"}
	}
	args := append([]string{"-hide_banner", "-loglevel", "error", "-nostdin", "-re",
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=120"}, enc...)
	args = append(args, "-payload_type", "96", "-f", "rtp", "rtp://"+tee.target()+"?pkt_size=1200")
	startChild(t, exec.Command(bin, args...))
	return l
}

// viewer is a WHEP viewer that takes one video codec only, as an
// H.264-only player or a VP8-only one would, and writes what it receives
// to a file ffprobe reads (Annex B for H.264, IVF for VP8).
type viewer struct {
	pc       *webrtc.PeerConnection
	resource string
	token    string

	mu      sync.Mutex
	codec   string
	ssrc    uint32
	packets int
	frames  int // packets with the marker bit
	w       interface {
		WriteRTP(*rtp.Packet) error
		Close() error
	}
	path string
}

// watch offers a WHEP session that receives video in mime only (fmtp
// its parameters; imageattr, if set, an a=imageattr line's value); it
// returns the viewer, or the status of a refused offer.
func watch(t *testing.T, n *Node, sid, mime, fmtp, imageattr string) (*viewer, int) {
	t.Helper()
	return watchQuery(t, n, sid, mime, fmtp, imageattr, "")
}

// watchQuery is watch with a query on the WHEP URL.
func watchQuery(t *testing.T, n *Node, sid, mime, fmtp, imageattr, query string) (*viewer, int) {
	t.Helper()
	m := &webrtc.MediaEngine{}
	fb := []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}}
	if err := m.RegisterCodec(webrtc.RTPCodecParameters{PayloadType: 102, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: mime, ClockRate: 90000, SDPFmtpLine: fmtp, RTCPFeedback: fb}}, webrtc.RTPCodecTypeVideo); err != nil {
		t.Fatal(err)
	}
	reg := &interceptor.Registry{}
	if err := webrtc.ConfigureRTCPReports(reg); err != nil {
		t.Fatal(err)
	}
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetInterfaceFilter(func(s string) bool { return s == "lo" })
	pc, err := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se)).
		NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	v := &viewer{pc: pc, token: joinToken(t, n, sid, "listener")}
	t.Cleanup(v.close)
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		v.mu.Lock()
		v.codec, v.ssrc = tr.Codec().MimeType, uint32(tr.SSRC())
		v.mu.Unlock()
		for {
			p, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			v.mu.Lock()
			v.packets++
			if p.Marker {
				v.frames++
			}
			if v.w != nil {
				_ = v.w.WriteRTP(p)
			}
			v.mu.Unlock()
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-g
	sdp := pc.LocalDescription().SDP
	if imageattr != "" {
		sdp = strings.Replace(sdp, "a=rtpmap:102 ", "a=imageattr:102 "+imageattr+"\r\na=rtpmap:102 ", 1)
	}
	u := n.URL() + "/api/v1/sessions/" + sid + "/whep"
	if query != "" {
		u += "?" + query
	}
	req, _ := http.NewRequest("POST", u, strings.NewReader(sdp))
	req.Header.Set("Content-Type", "application/sdp")
	req.Header.Set("Authorization", "Bearer "+v.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Logf("WHEP %s: %d %s", mime, resp.StatusCode, ans)
		return nil, resp.StatusCode
	}
	v.resource = n.URL() + resp.Header.Get("Location")
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(ans)}); err != nil {
		t.Fatal(err)
	}
	return v, resp.StatusCode
}

// record starts writing what arrives to a new file.
func (v *viewer) record(t *testing.T, name string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.w != nil {
		v.w.Close()
	}
	v.path = filepath.Join(t.TempDir(), name)
	var err error
	if strings.EqualFold(v.codec, webrtc.MimeTypeH264) {
		v.w, err = h264writer.New(v.path)
	} else {
		v.w, err = ivfwriter.New(v.path, ivfwriter.WithCodec(webrtc.MimeTypeVP8))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// stop closes the file and returns its path.
func (v *viewer) stop() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.w != nil {
		v.w.Close()
		v.w = nil
	}
	return v.path
}

func (v *viewer) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.packets
}

func (v *viewer) frameCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.frames
}

func (v *viewer) pli() error {
	v.mu.Lock()
	ssrc := v.ssrc
	v.mu.Unlock()
	return v.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: ssrc}})
}

// hangup deletes the WHEP resource (the node's side goes) and closes.
func (v *viewer) hangup() {
	if v.resource != "" {
		req, _ := http.NewRequest("DELETE", v.resource, nil)
		req.Header.Set("Authorization", "Bearer "+v.token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		v.resource = ""
	}
	v.close()
}

func (v *viewer) close() {
	v.stop()
	v.pc.Close()
}

// probeVideo decodes a file with ffprobe: its codec, the width of its
// last decoded picture and the frames it decoded.
func probeVideo(t *testing.T, path string) (codec string, width, frames int) {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffprobe")
	run := func(args ...string) string {
		out, err := exec.Command(bin, append([]string{"-v", "error", "-select_streams", "v:0"}, append(args, "-of", "csv=p=0", path)...)...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Logf("ffprobe: %s", ee.Stderr)
			}
			t.Fatalf("ffprobe %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	codec = run("-show_entries", "stream=codec_name")
	for _, l := range strings.Split(run("-show_entries", "frame=width"), "\n") {
		if w, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(l, ","))); err == nil {
			width = w
			frames++
		}
	}
	return codec, width, frames
}

// receive records what v gets until it has n more frames (the source
// sends a keyframe a second, where a recording mid-stream can start), and
// decodes the file.
func (v *viewer) receive(t *testing.T, name string, n int) (codec string, width, frames int) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, name+": the track", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.codec != ""
	})
	v.record(t, name)
	from := v.frameCount()
	testutil.WaitFor(t, 30*time.Second, name+": frames", func() bool { return v.frameCount() >= from+n })
	return probeVideo(t, v.stop())
}

// decodes records n frames of what v receives and has ffprobe decode
// them: codec, pictures width wide, at least 5 of them (a recording that
// starts mid-stream waits for a keyframe, which a lost packet on this
// busy machine can put off by a GOP).
func (v *viewer) decodes(t *testing.T, name string, n int, codec string, width int) {
	t.Helper()
	c, w, frames := v.receive(t, name, n)
	t.Logf("%s: %s, %d wide, %d frames", name, c, w, frames)
	if c != codec || w != width || frames < 5 {
		t.Fatalf("%s decoded as %s %d wide, %d frames; want %s %d wide, 5 frames or more", name, c, w, frames, codec, width)
	}
}

// TestWHEPViewerGetsItsCodec: issue 18, transcoding chosen per receiver.
// A VP8 camera (ffmpeg over a plain RTP link) reaches an H.264-only WHEP
// viewer (pion) as H.264 that ffprobe decodes; a second H.264 viewer of
// the same class shares the one transcoder; the viewer's PLI reaches the
// transcoder; a viewer of another class is refused beyond vtranscode.max
// (503, counted); a killed ffmpeg child is replaced and the viewer's
// frames resume; the transcoder stops when its last viewer leaves.
func TestWHEPViewerGetsItsCodec(t *testing.T) {
	testutil.NeedBinary(t, "ffprobe")
	cfg := testConfig(t, t.TempDir())
	cfg.VTranscode.Max = 1
	n := startNode(t, cfg)
	s := createSession(t, n, "vtranscode")
	sendCamera(t, n, s.ID, "VP8/90000")
	testutil.WaitFor(t, 20*time.Second, "the camera's track", func() bool {
		for _, tr := range n.sessions.Room(s.ID).Tracks() {
			if p, _ := tr.Stats(); p > 0 {
				return true
			}
		}
		return false
	})

	const h264 = "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"
	v, code := watch(t, n, s.ID, webrtc.MimeTypeH264, h264, "")
	if v == nil {
		t.Fatalf("an H.264-only viewer: %d", code)
	}
	v.decodes(t, "first.h264", 40, "h264", 320)
	if !strings.EqualFold(v.codec, webrtc.MimeTypeH264) {
		t.Errorf("the viewer's track is %s", v.codec)
	}

	v2, code := watch(t, n, s.ID, webrtc.MimeTypeH264, h264, "")
	if v2 == nil {
		t.Fatalf("a second H.264 viewer of the same class: %d", code)
	}
	testutil.WaitFor(t, 20*time.Second, "the second viewer's packets", func() bool { return v2.count() > 20 })
	var node struct{ VTranscoders []vtranscode.Info }
	if code := call(t, "GET", n.URL()+"/api/v1/node", nil, &node); code != 200 {
		t.Fatalf("GET /api/v1/node: %d", code)
	}
	if l := node.VTranscoders; len(l) != 1 || l[0].Receivers != 2 || l[0].Codec != "video/H264" || l[0].Width != 1280 || l[0].PID == 0 {
		t.Fatalf("transcoders %+v, want one H.264 (720p class) for two receivers", l)
	}

	// A PLI reaches the transcoder.
	before := metricValue(t, n, "convene_vtranscode_keyframe_requests_total")
	if err := v.pli(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the PLI at the transcoder", func() bool {
		return metricValue(t, n, "convene_vtranscode_keyframe_requests_total") > before
	})

	// Another class (a 160×90 picture) needs another transcoder: refused.
	if _, code := watch(t, n, s.ID, webrtc.MimeTypeH264, h264, "recv [x=160,y=90]"); code != http.StatusServiceUnavailable {
		t.Errorf("a viewer beyond vtranscode.max: %d, want 503", code)
	}
	if got := metricValue(t, n, `convene_vtranscode_refused_total{reason="limit"}`); got != 1 {
		t.Errorf("refusals counted: %v, want 1", got)
	}

	// The child is killed: a new one takes over and the frames resume.
	pid := n.vtranscode.List()[0].PID
	if pid == 0 {
		t.Fatal("no child runs")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	testutil.WaitFor(t, 20*time.Second, "a new child", func() bool {
		l := n.vtranscode.List()
		return len(l) == 1 && l[0].PID != 0 && l[0].PID != pid
	})
	t.Logf("the killed child (pid %d) was replaced after %v", pid, time.Since(t0).Round(time.Millisecond))
	v.decodes(t, "after.h264", 40, "h264", 320)
	if got := metricValue(t, n, "convene_vtranscode_child_starts_total"); got < 2 {
		t.Errorf("child starts %v, want 2 or more", got)
	}

	// The child's CPU, from /proc over 3 s (a log line, not a bound).
	if i := n.vtranscode.List()[0]; i.PID != 0 {
		cpu0, err0 := ffmpeg.CPUTime(i.PID)
		t0 := time.Now()
		time.Sleep(3 * time.Second)
		cpu1, err1 := ffmpeg.CPUTime(i.PID)
		if err0 == nil && err1 == nil {
			t.Logf("the child (320×240 15 fps VP8 → H.264) used %.3f cores over %v, making %d frames",
				(cpu1-cpu0).Seconds()/time.Since(t0).Seconds(), time.Since(t0).Round(time.Millisecond), n.vtranscode.List()[0].Frames-i.Frames)
		}
	}
	child := n.vtranscode.List()[0].PID
	v.hangup()
	v2.hangup()
	testutil.WaitFor(t, 10*time.Second, "the transcoder to stop with its last viewer", func() bool { return n.vtranscode.Count() == 0 })
	testutil.WaitFor(t, 10*time.Second, "its child to end", func() bool { return syscall.Kill(child, 0) != nil })
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "vtranscode")); err != nil && !os.IsNotExist(err) {
		t.Error(err)
	}
}

// TestWHEPVP8ViewerOfH264Camera: the reverse, an H.264 camera (a plain RTP
// link that says so) reaches a VP8-only viewer as VP8 that decodes, at
// the size its fmtp allows (max-fs=99: 160×90); another viewer that asks
// for ?max_height=180 gets its own transcoder at 240 wide (320×240 fitted
// into 320×180); a bad max_height is refused before anything starts.
func TestWHEPVP8ViewerOfH264Camera(t *testing.T) {
	testutil.NeedBinary(t, "ffprobe")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "vtranscode-vp8")
	sendCamera(t, n, s.ID, "H264/90000")
	v, code := watch(t, n, s.ID, webrtc.MimeTypeVP8, "max-fs=99", "")
	if v == nil {
		t.Fatalf("a VP8-only viewer: %d", code)
	}
	testutil.WaitFor(t, 20*time.Second, "the viewer's track", func() bool { return v.count() > 0 })
	v.decodes(t, "vp8.ivf", 40, "vp8", 120) // 320×240 fitted into 160×90
	if _, code := watchQuery(t, n, s.ID, webrtc.MimeTypeVP8, "", "", "max_height=5000"); code != http.StatusBadRequest {
		t.Errorf("max_height=5000: %d, want 400", code)
	}
	v2, code := watchQuery(t, n, s.ID, webrtc.MimeTypeVP8, "", "", "max_height=180&max_fps=10")
	if v2 == nil {
		t.Fatalf("a VP8 viewer with max_height: %d", code)
	}
	v2.decodes(t, "vp8-180.ivf", 40, "vp8", 240) // into 320×180
	if l := n.vtranscode.List(); len(l) != 2 {
		t.Errorf("transcoders %+v, want two classes", l)
	}
	for _, i := range n.vtranscode.List() {
		if i.Height == 180 && i.FPS != 10 {
			t.Errorf("the max_fps=10 class runs at %d fps", i.FPS)
		}
	}
}

// TestRTPLinkTakesItsCodec: a receiving plain RTP video link that names
// H.264 gets a VP8 camera transcoded (ffprobe decodes what reaches its
// socket as H.264), and its transcoder stops when the link goes.
func TestRTPLinkTakesItsCodec(t *testing.T) {
	testutil.NeedBinary(t, "ffprobe")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "vtranscode-rtp")
	rx := udpConn(t)
	l := addLink(t, n, s.ID, map[string]any{"remote": rx.LocalAddr().String(), "kind": "video", "direction": "recvonly",
		"codec": "H264/90000", "rtcp_mux": true})
	sendCamera(t, n, s.ID, "VP8/90000")
	path := filepath.Join(t.TempDir(), "link.h264")
	w, err := h264writer.New(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	frames := 0
	for frames < 40 {
		rx.SetReadDeadline(time.Now().Add(20 * time.Second))
		k, err := rx.Read(buf)
		if err != nil {
			t.Fatalf("the link got %d frames: %v", frames, err)
		}
		var p rtp.Packet
		if p.Unmarshal(buf[:k]) != nil {
			continue
		}
		if p.Marker {
			frames++
		}
		_ = w.WriteRTP(&p)
	}
	w.Close()
	codec, width, decoded := probeVideo(t, path)
	t.Logf("the H.264 link's stream: %s, %d wide, %d frames", codec, width, decoded)
	if codec != "h264" || width != 320 || decoded < 10 {
		t.Fatalf("the H.264 link decoded %s %d wide, %d frames", codec, width, decoded)
	}
	if code := call(t, "DELETE", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links/"+l.ID, nil, nil); code != 204 {
		t.Fatalf("delete the link: %d", code)
	}
	testutil.WaitFor(t, 10*time.Second, "the transcoder to stop with its link", func() bool { return n.vtranscode.Count() == 0 })
}

// TestWHEPViewerOfABrowserCamera: a browser's VP8 camera (a pion
// publisher connection sending ffmpeg's VP8) reaches an H.264-only WHEP
// viewer as H.264 that ffprobe decodes, and the viewer's PLI reaches the
// browser as a PLI through the transcoder (which the transcoder's child
// turns into a keyframe out: TestKeyframesFollowTheSource).
func TestWHEPViewerOfABrowserCamera(t *testing.T) {
	testutil.NeedBinary(t, "ffprobe")
	testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "vtranscode-browser")
	plis := publishVP8(t, n, s.ID, "Ada", 30)
	v, code := watch(t, n, s.ID, webrtc.MimeTypeH264, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", "")
	if v == nil {
		t.Fatalf("an H.264-only viewer: %d", code)
	}
	v.decodes(t, "browser.h264", 60, "h264", 320) // the source's keyframe every 30 frames
	before, requests := plis.Load(), metricValue(t, n, "convene_vtranscode_keyframe_requests_total")
	if err := v.pli(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the viewer's PLI at the browser", func() bool {
		return plis.Load() > before && metricValue(t, n, "convene_vtranscode_keyframe_requests_total") > requests
	})
}

// TestBrowserWithoutH264GetsVP8: a browser that takes only VP8 (a pion
// client of the signalling socket) subscribed to an H.264 camera: the
// node offered the camera's H.264, the browser's answer took VP8 alone,
// so the track is bound as VP8 and fed by a video transcoder; ffprobe
// decodes what the browser received as VP8.
func TestBrowserWithoutH264GetsVP8(t *testing.T) {
	testutil.NeedBinary(t, "ffprobe")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "vtranscode-browser-vp8")
	sendCamera(t, n, s.ID, "H264/90000")
	path := filepath.Join(t.TempDir(), "browser.ivf")
	w, err := ivfwriter.New(path, ivfwriter.WithCodec(webrtc.MimeTypeVP8))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	frames, codec := 0, ""
	_, tok := joinMember(t, n, s.ID, "Vic")
	dialRTC(t, n, s.ID, tok, rtctest.Options{VideoCodecs: []string{webrtc.MimeTypeVP8}, OnVideo: func(c string, p *rtp.Packet) {
		mu.Lock()
		defer mu.Unlock()
		codec = c
		if w != nil {
			_ = w.WriteRTP(p)
			if p.Marker {
				frames++
			}
		}
	}})
	testutil.WaitFor(t, 30*time.Second, "the browser's frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return frames >= 40
	})
	mu.Lock()
	w.Close()
	w = nil
	got := codec
	mu.Unlock()
	if !strings.EqualFold(got, webrtc.MimeTypeVP8) {
		t.Errorf("the browser's track is %s", got)
	}
	c, width, decoded := probeVideo(t, path)
	t.Logf("the browser's stream: %s, %d wide, %d frames", c, width, decoded)
	if c != "vp8" || width != 320 || decoded < 5 {
		t.Fatalf("the browser decoded %s %d wide, %d frames", c, width, decoded)
	}
	if l := n.vtranscode.List(); len(l) != 1 || l[0].Codec != "video/VP8" {
		t.Errorf("transcoders %+v, want one to VP8", l)
	}
}
