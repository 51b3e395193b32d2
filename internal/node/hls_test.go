package node

import (
	"bufio"
	"bytes"
	"fmt"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// sendFFmpeg makes ffmpeg send a tone (PCMU) and a test card (VP8, 320×240,
// a keyframe a second) into a session through two plain RTP links, for
// d; it returns the video link.
func sendFFmpeg(t *testing.T, n *Node, sid string, d time.Duration) linkJSON {
	t.Helper()
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	audioTee, videoTee := newTee(t), newTee(t)
	al := addLink(t, n, sid, map[string]any{"remote": audioTee.remote(), "kind": "audio", "direction": "sendonly"})
	vl := addLink(t, n, sid, map[string]any{"remote": videoTee.remote(), "kind": "video", "direction": "sendonly"})
	audioTee.run(al)
	videoTee.run(vl)
	secs := strconv.Itoa(int(d.Seconds()))
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-re",
		"-f", "lavfi", "-i", "sine=frequency=440:duration="+secs,
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration="+secs,
		"-map", "0:a", "-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", "rtp://"+audioTee.target(),
		"-map", "1:v", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-g", "15", "-f", "rtp", "rtp://"+videoTee.target())
	startChild(t, cmd)
	return vl
}

// startChild starts a peer process (its stderr to the test's) that the
// test's end kills.
func startChild(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// noRedirect is a client that shows a redirect instead of following it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, c *http.Client, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// media is what an LL-HLS media playlist says.
type mediaPL struct {
	sequence  int
	init      string   // EXT-X-MAP's URI
	segments  []string // not the gaps
	durations []float64
	msn       []int // each segment's media sequence number
	parts     []string
	// partsNext are the parts of the segment under way (after the last
	// whole one).
	partsNext int
	preload   string
	text      string
}

var uriAttr = regexp.MustCompile(`URI="([^"]+)"`)

func parseMedia(t *testing.T, b []byte) mediaPL {
	t.Helper()
	p := mediaPL{text: string(b)}
	gap := false
	k := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"):
			p.sequence, _ = strconv.Atoi(strings.TrimPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"))
		case strings.HasPrefix(l, "#EXT-X-MAP:"):
			if m := uriAttr.FindStringSubmatch(l); m != nil {
				p.init = m[1]
			}
		case strings.HasPrefix(l, "#EXT-X-PART:"):
			if m := uriAttr.FindStringSubmatch(l); m != nil {
				p.parts = append(p.parts, m[1])
				p.partsNext++
			}
		case strings.HasPrefix(l, "#EXT-X-PRELOAD-HINT:"):
			if m := uriAttr.FindStringSubmatch(l); m != nil {
				p.preload = m[1]
			}
		case l == "#EXT-X-GAP":
			gap = true
		case strings.HasPrefix(l, "#EXTINF:"):
			if !gap {
				v, _, _ := strings.Cut(strings.TrimPrefix(l, "#EXTINF:"), ",")
				f, _ := strconv.ParseFloat(v, 64)
				p.durations = append(p.durations, f)
			}
		case l != "" && !strings.HasPrefix(l, "#"):
			if !gap {
				p.segments = append(p.segments, l)
				p.msn = append(p.msn, p.sequence+k)
			}
			gap = false
			k++
			p.partsNext = 0
		}
	}
	return p
}

// lastMSN is the media sequence number of the last whole segment (-1
// for none).
func (p mediaPL) lastMSN() int {
	if len(p.msn) == 0 {
		return -1
	}
	return p.msn[len(p.msn)-1]
}

// signedView opens a session's stream as a viewer with a listener's
// join token and returns the signed prefix its playlists are under.
func signedView(t *testing.T, n *Node, sid, token string) string {
	t.Helper()
	code, h, _ := get(t, noRedirect, n.URL()+"/hls/"+sid+"/index.m3u8?token="+token)
	if code != 302 {
		t.Fatalf("viewer: %d, want 302", code)
	}
	return n.URL() + strings.TrimSuffix(h.Get("Location"), "index.m3u8")
}

// waitHLSMedia waits for a media playlist (video1_stream.m3u8,
// audio2_stream.m3u8) under prefix to list k whole segments.
func waitHLSMedia(t *testing.T, prefix, name string, k int, d time.Duration) mediaPL {
	t.Helper()
	var p mediaPL
	testutil.WaitFor(t, d, fmt.Sprintf("%d segments in %s", k, name), func() bool {
		code, _, b := get(t, http.DefaultClient, prefix+name)
		if code == 200 {
			p = parseMedia(t, b)
		}
		return len(p.segments) >= k
	})
	return p
}

// fmp4File writes a stream's init section and its segment (or part) seg
// into one file ffprobe reads.
func fmp4File(t *testing.T, prefix, init, seg string) string {
	t.Helper()
	var all []byte
	for _, f := range []string{init, seg} {
		code, _, b := get(t, http.DefaultClient, prefix+f)
		if code != 200 || len(b) == 0 {
			t.Fatalf("%s: %d, %d bytes", f, code, len(b))
		}
		all = append(all, b...)
	}
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(seg, ".mp4")+".mp4")
	if err := os.WriteFile(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// timing is when a file's first stream starts and ends (its first
// packet's time, its last one's plus its duration), as ffprobe reads it.
func timing(t *testing.T, ffprobe, path string) (start, end float64) {
	t.Helper()
	out, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "0", "-show_entries", "packet=pts_time,duration_time", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 {
		t.Fatalf("ffprobe %s: no packets", path)
	}
	for i, l := range lines {
		f := strings.Split(l, ",")
		if len(f) < 2 {
			continue
		}
		pts, _ := strconv.ParseFloat(f[0], 64)
		d, _ := strconv.ParseFloat(f[1], 64)
		if i == 0 || pts < start {
			start = pts
		}
		end = max(end, pts+d)
	}
	return start, end
}

// TestHLSFFmpeg: a session fed by ffmpeg (PCMU tone, VP8 test card) is
// streamed as low-latency HLS once its chair asks: a viewer with a
// listener's join token the chair issued is sent under a signed prefix
// (one the chair revoked is not); the multivariant playlist names the
// video (H.264) and the mix (an Opus rendition); the media playlists can
// block (CAN-BLOCK-RELOAD=YES) and list parts with a preload hint; a
// blocking request for the next part returns once it is made; ffprobe
// reads the stream as a viewer (h264 and opus, the card in the 640×360
// frame) and its segments (about
// 1 s each, each starting where the one before ended, the mix loud). A
// request without a valid token gets 401, a file outside a signed prefix
// 403; a second stream beyond streaming.hls_max is 503. Killing the
// ffmpeg child starts a new one within 2 s and the parts go on; a hung
// child is replaced. A thumbnail of the camera is a 320×240 JPEG.
// Stopping the stream removes it.
func TestHLSFFmpeg(t *testing.T) {
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.Streaming.HLSMax = 1
	n := startNode(t, cfg)
	s := createSession(t, n, "hls")
	vl := sendFFmpeg(t, n, s.ID, 90*time.Second)
	hlsURL := n.URL() + "/api/v1/sessions/" + s.ID + "/hls"

	_, ptok := joinAs(t, n, s.ID, "Pat", "participant")
	if code := callAs(t, ptok, "POST", hlsURL, map[string]any{}, nil); code != 403 {
		t.Errorf("a participant starts HLS: %d, want 403", code)
	}
	_, ctok := joinAs(t, n, s.ID, "Chris", "chair")
	var info struct {
		Playlist string `json:"playlist"`
		Video    string `json:"video_track"`
	}
	started := time.Now()
	if code := callAs(t, ctok, "POST", hlsURL, map[string]any{}, &info); code != 201 {
		t.Fatalf("the chair starts HLS: %d", code)
	}
	if code := callAs(t, ctok, "POST", hlsURL, map[string]any{}, nil); code != 200 {
		t.Errorf("starting it again: %d, want 200", code)
	}
	other := createSession(t, n, "second")
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+other.ID+"/hls", map[string]any{}, nil); code != 503 {
		t.Errorf("a stream beyond hls_max: %d, want 503", code)
	}
	t.Logf("playlist %s, video track %s (link %s)", info.Playlist, info.Video, vl.ID)

	// Viewers: the chair hands out viewer links (listener tokens) and
	// revokes one.
	chairToken := func() (tok, id string) {
		var jt struct{ Token, ID string }
		if code := callAs(t, ctok, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/tokens", map[string]any{"role": "listener", "ttl_seconds": 43200}, &jt); code != 201 {
			t.Fatalf("the chair issues a viewer token: %d", code)
		}
		return jt.Token, jt.ID
	}
	viewer, _ := chairToken()
	revoked, rid := chairToken()
	if code := callAs(t, ctok, "DELETE", n.URL()+"/api/v1/sessions/"+s.ID+"/tokens/"+rid, nil, nil); code != 204 {
		t.Fatalf("the chair revokes a viewer token: %d", code)
	}
	view := n.URL() + info.Playlist
	for name, url := range map[string]string{
		"revoked":            view + "?token=" + revoked,
		"no token":           view,
		"garbage":            view + "?token=cv1.garbage.x",
		"other session":      view + "?token=" + joinToken(t, n, other.ID, "listener"),
		"API key in the URL": view + "?token=" + testAPIKey,
	} {
		if code, _, _ := get(t, noRedirect, url); code != 401 {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	prefix := signedView(t, n, s.ID, viewer)
	t.Logf("signed prefix %s", strings.TrimPrefix(prefix, n.URL()))

	// The multivariant playlist: the video and the mix.
	code, h, mv := get(t, http.DefaultClient, prefix+"index.m3u8")
	if code != 200 || !strings.Contains(h.Get("Content-Type"), "mpegurl") {
		t.Fatalf("multivariant playlist: %d %s", code, h.Get("Content-Type"))
	}
	t.Logf("multivariant playlist %v after the start:\n%s", time.Since(started).Round(time.Millisecond), mv)
	for _, want := range []string{`CODECS="avc1.`, `opus"`, "TYPE=AUDIO", "video1_stream.m3u8", `URI="audio2_stream.m3u8"`} {
		if !strings.Contains(string(mv), want) {
			t.Errorf("the multivariant playlist lacks %s", want)
		}
	}
	// The first part a player can fetch.
	var first mediaPL
	testutil.WaitFor(t, 30*time.Second, "a first part", func() bool {
		code, _, b := get(t, http.DefaultClient, prefix+"video1_stream.m3u8")
		if code == 200 {
			first = parseMedia(t, b)
		}
		return len(first.parts) > 0
	})
	t.Logf("the first part listed %v after the start", time.Since(started).Round(time.Millisecond))

	p := waitHLSMedia(t, prefix, "video1_stream.m3u8", 4, 40*time.Second)
	for _, want := range []string{"#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES", "#EXT-X-PART-INF:PART-TARGET=", "#EXT-X-PART:", "#EXT-X-PRELOAD-HINT:TYPE=PART", "#EXT-X-MAP:"} {
		if !strings.Contains(p.text, want) {
			t.Errorf("the video's media playlist lacks %s:\n%s", want, p.text)
		}
	}
	for i, d := range p.durations {
		if d < 0.8 || d > 2.5 {
			t.Errorf("segment %s lasts %.3f s, want about 1", p.segments[i], d)
		}
	}

	// A blocking reload for the part after the last one listed returns
	// once it is made, and lists it; one too far ahead is 400.
	msn, part := p.lastMSN()+1, p.partsNext
	t0 := time.Now()
	code, _, b := get(t, http.DefaultClient, fmt.Sprintf("%svideo1_stream.m3u8?_HLS_msn=%d&_HLS_part=%d", prefix, msn, part))
	held := time.Since(t0)
	np := parseMedia(t, b)
	if code != 200 || len(np.parts) == 0 {
		t.Fatalf("blocking reload: %d\n%s", code, b)
	}
	if !(np.lastMSN() >= msn || (np.lastMSN() == msn-1 && np.partsNext > part)) {
		t.Errorf("the blocking reload for part %d of segment %d answered without it:\n%s", part, msn, b)
	}
	if held > 2*time.Second {
		t.Errorf("the blocking reload was held %v, more than a part's time", held)
	}
	t.Logf("blocking reload for msn %d part %d held %v", msn, part, held.Round(time.Millisecond))
	if code, _, _ := get(t, http.DefaultClient, fmt.Sprintf("%svideo1_stream.m3u8?_HLS_msn=%d&_HLS_part=0", prefix, msn+10)); code != 400 {
		t.Errorf("a blocking reload 10 segments ahead: %d, want 400", code)
	}
	// The preload hint's part is answered once it is made.
	t0 = time.Now()
	if code, _, b := get(t, http.DefaultClient, prefix+np.preload); code != 200 || len(b) == 0 {
		t.Errorf("the preload hint's part %s: %d, %d bytes", np.preload, code, len(b))
	}
	t.Logf("the preload hint's part came %v after it was asked", time.Since(t0).Round(time.Millisecond))

	seg := p.segments[len(p.segments)-1]
	if code, _, _ := get(t, http.DefaultClient, n.URL()+"/hls/"+s.ID+"/AAAA-forged/"+seg); code != 403 {
		t.Errorf("a segment under a forged prefix: %d, want 403", code)
	}
	// (ServeMux sends a path with dot segments to its clean form: 301.)
	for _, f := range []string{"../../etc/passwd", "..%2f..%2fetc%2fpasswd", "stream.sdp", "index.m3u8.tmp", "gap.mp4", "seg1.ts"} {
		if code, _, _ := get(t, noRedirect, prefix+f); code == 200 {
			t.Errorf("%s under the prefix: %d", f, code)
		}
	}

	// ffprobe plays the stream as a viewer (following the redirect).
	pr := probe(t, ffprobe, view+"?token="+viewer)
	var codecs []string
	for _, st := range pr.Streams {
		codecs = append(codecs, st.CodecName)
		if st.CodecType == "video" && st.Width != 640 {
			t.Errorf("video %d wide, want the 320×240 card in the 640×360 frame", st.Width)
		}
	}
	slices.Sort(codecs)
	if strings.Join(codecs, ",") != "h264,opus" {
		t.Errorf("the stream's codecs %v, want h264 and opus", codecs)
	}
	// Two video segments in a row: each with its init section, about
	// 1 s, the second starting where the first ended.
	var starts, ends [2]float64
	for i, sg := range p.segments[len(p.segments)-3 : len(p.segments)-1] {
		path := fmp4File(t, prefix, p.init, sg)
		starts[i], ends[i] = timing(t, ffprobe, path)
		// A second of the card at 15 fps: 15 frames, and bytes enough
		// for a picture (not an encoder that thinks it has 90,000 frames
		// a second and starves each: 2 KB a segment).
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(ffprobe, "-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", path).Output()
		frames, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		t.Logf("segment %s with its init section: %d bytes, %d frames", sg, fi.Size(), frames)
		if fi.Size() < 10000 || frames < 10 || frames > 20 {
			t.Errorf("segment %s: %d bytes, %d frames; want a second of the 15 fps test card", sg, fi.Size(), frames)
		}
		if sp := probe(t, ffprobe, path); len(sp.Streams) != 1 || sp.Streams[0].CodecName != "h264" {
			t.Errorf("segment %s: %+v, want one h264 stream", sg, sp.Streams)
		}
	}
	t.Logf("video segments from %.3f to %.3f and from %.3f to %.3f", starts[0], ends[0], starts[1], ends[1])
	if gap := starts[1] - ends[0]; gap > 0.1 || gap < -0.1 {
		t.Errorf("the second segment starts %.3f s from the first's end", gap)
	}
	// The mix: Opus segments that carry the tone, in step with the video.
	ap := waitHLSMedia(t, prefix, "audio2_stream.m3u8", 3, 10*time.Second)
	apath := fmp4File(t, prefix, ap.init, ap.segments[len(ap.segments)-2])
	if sp := probe(t, ffprobe, apath); len(sp.Streams) != 1 || sp.Streams[0].CodecName != "opus" {
		t.Errorf("audio segment: %+v, want one opus stream", sp.Streams)
	}
	out, _ := exec.Command(ffmpeg, "-hide_banner", "-nostdin", "-i", apath, "-af", "volumedetect", "-f", "null", "-").CombinedOutput()
	m := regexp.MustCompile(`mean_volume: (-?[0-9.]+) dB`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("volumedetect: %s", out)
	}
	if v, _ := strconv.ParseFloat(string(m[1]), 64); v < -40 {
		t.Errorf("audio at %.1f dB, want the tone", v)
	} else {
		t.Logf("audio segment: the tone at %.1f dB", v)
	}
	// An audio segment and the video segment of the same number start
	// together (one time line).
	for i, sq := range ap.msn {
		for j, vq := range p.msn {
			if sq == vq && i < len(ap.segments)-1 && j < len(p.segments)-1 {
				as, _ := timing(t, ffprobe, fmp4File(t, prefix, ap.init, ap.segments[i]))
				vs, _ := timing(t, ffprobe, fmp4File(t, prefix, p.init, p.segments[j]))
				t.Logf("segment %d: audio starts at %.3f, video at %.3f", sq, as, vs)
				if d := as - vs; d > 0.1 || d < -0.1 {
					t.Errorf("segment %d: audio starts at %.3f, video at %.3f", sq, as, vs)
				}
			}
		}
	}

	// Thumbnails: a reader of the session gets the camera as a JPEG.
	thumb := n.URL() + "/api/v1/sessions/" + s.ID + "/tracks/" + vl.ID + "/thumbnail.jpg"
	if code := callNoAuth(t, "GET", thumb); code != 401 {
		t.Errorf("a thumbnail without a token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", thumb, nil)
	req.Header.Set("Authorization", "Bearer "+ptok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("thumbnail: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	jc, err := jpeg.DecodeConfig(bytes.NewReader(img))
	if err != nil || jc.Width != 320 || jc.Height != 240 {
		t.Errorf("thumbnail: %dx%d, %v; want a 320x240 JPEG", jc.Width, jc.Height, err)
	}
	if _, err := jpeg.Decode(bytes.NewReader(img)); err != nil {
		t.Errorf("thumbnail does not decode: %v", err)
	}
	if code := callAs(t, ptok, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/tracks/nope/thumbnail.jpg", nil, nil); code != 404 {
		t.Errorf("thumbnail of no track: %d, want 404", code)
	}

	// Kill the child: a new one (a new PID) runs within 2 s, and the
	// stream goes on: new segments, new parts, the same playlist.
	pid := n.hls.PID(s.ID)
	if pid == 0 {
		t.Fatal("no ffmpeg child")
	}
	_, _, b = get(t, http.DefaultClient, prefix+"video1_stream.m3u8")
	before := parseMedia(t, b).lastMSN()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var newPID int
	testutil.WaitFor(t, 2*time.Second, "a new ffmpeg child within 2 s", func() bool {
		newPID = n.hls.PID(s.ID)
		return newPID != 0 && newPID != pid
	})
	t.Logf("child %d killed; child %d runs %v later", pid, newPID, time.Since(killed).Round(time.Millisecond))
	after := waitHLSMedia(t, prefix, "video1_stream.m3u8", 1, time.Second) // the same playlist
	testutil.WaitFor(t, 20*time.Second, "segments of the new child", func() bool {
		_, _, b := get(t, http.DefaultClient, prefix+"video1_stream.m3u8")
		after = parseMedia(t, b)
		return after.lastMSN() >= before+3
	})
	t.Logf("segments up to %d before the kill, up to %d %v after it", before, after.lastMSN(), time.Since(killed).Round(time.Millisecond))
	last := after.segments[len(after.segments)-1]
	if sp := probe(t, ffprobe, fmp4File(t, prefix, after.init, last)); len(sp.Streams) != 1 || sp.Streams[0].Width != 640 {
		t.Errorf("a segment of the new child: %+v", sp.Streams)
	}
	probe(t, ffprobe, view+"?token="+viewer)

	// A child that hangs (stopped: no progress lines) is killed by the
	// supervisor and replaced.
	pid = n.hls.PID(s.ID)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	testutil.WaitFor(t, 20*time.Second, "the hung child replaced", func() bool {
		p := n.hls.PID(s.ID)
		return p != 0 && p != pid
	})
	t.Logf("child %d hung; replaced %v later", pid, time.Since(hung).Round(time.Millisecond))

	// Stop: the stream goes; its files are 404, its viewers' entry too.
	if code := callAs(t, ctok, "DELETE", hlsURL, nil, nil); code != 204 {
		t.Errorf("stop: %d, want 204", code)
	}
	if code, _, _ := get(t, noRedirect, view+"?token="+viewer); code != 404 {
		t.Errorf("viewer after stop: %d, want 404", code)
	}
	if code, _, _ := get(t, http.DefaultClient, prefix+"video1_stream.m3u8"); code != 404 {
		t.Errorf("a playlist after stop: %d, want 404", code)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "hls", s.ID)); !os.IsNotExist(err) {
		t.Errorf("the stream's directory is still there: %v", err)
	}
}
