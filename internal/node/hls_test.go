package node

import (
	"bufio"
	"bytes"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// playlist is what a media playlist says.
type playlist struct {
	sequence  int
	segments  []string
	durations []float64
	// after are the segments that follow a discontinuity (a new child).
	after map[string]bool
}

func parsePlaylist(t *testing.T, b []byte) playlist {
	t.Helper()
	p := playlist{after: map[string]bool{}}
	discont := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"):
			p.sequence, _ = strconv.Atoi(strings.TrimPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"))
		case strings.HasPrefix(l, "#EXTINF:"):
			v, _, _ := strings.Cut(strings.TrimPrefix(l, "#EXTINF:"), ",")
			f, _ := strconv.ParseFloat(v, 64)
			p.durations = append(p.durations, f)
		case l == "#EXT-X-DISCONTINUITY":
			discont = true
		case l != "" && !strings.HasPrefix(l, "#"):
			p.segments = append(p.segments, l)
			p.after[l], discont = discont, false
		}
	}
	return p
}

var segNum = regexp.MustCompile(`^seg([0-9]+)\.ts$`)

func segmentNumber(name string) int {
	m := segNum.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	k, _ := strconv.Atoi(m[1])
	return k
}

func lastSegment(p playlist) int {
	if len(p.segments) == 0 {
		return -1
	}
	return segmentNumber(p.segments[len(p.segments)-1])
}

// restartedAfter is the first segment after k that follows a
// discontinuity (-1 for none).
func restartedAfter(p playlist, k int) int {
	for _, s := range p.segments {
		if n := segmentNumber(s); n > k && p.after[s] {
			return n
		}
	}
	return -1
}

// TestHLSFFmpeg: a session fed by ffmpeg (PCMU tone, VP8 test card) is
// streamed as HLS once its chair asks: a viewer with a listener's join
// token the chair issued is sent under a signed prefix (one the chair
// revoked is not), ffprobe reads the playlist (H.264
// and AAC) and its segments (about 2 s each, each starting where the one
// before ended); a request without a valid token gets 401, a segment
// outside a signed prefix 403; a second stream beyond streaming.hls_max
// is 503. Killing the ffmpeg child starts a new one (a new PID) that adds
// segments after a discontinuity. A thumbnail of the camera is a 320×240
// JPEG. Stopping the stream removes it.
func TestHLSFFmpeg(t *testing.T) {
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.Streaming.HLSMax = 1
	n := startNode(t, cfg)
	s := createSession(t, n, "hls")
	vl := sendFFmpeg(t, n, s.ID, 60*time.Second)
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
		"revoked":             view + "?token=" + revoked,
		"no token":            view,
		"garbage":             view + "?token=cv1.garbage.x",
		"other session":       view + "?token=" + joinToken(t, n, other.ID, "listener"),
		"API key in the URL":  view + "?token=" + testAPIKey,
		"token in the header": view,
	} {
		if code, _, _ := get(t, noRedirect, url); code != 401 {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	code, h, _ := get(t, noRedirect, view+"?token="+viewer)
	if code != 302 {
		t.Fatalf("viewer: %d, want 302", code)
	}
	signed := n.URL() + h.Get("Location")
	prefix := strings.TrimSuffix(signed, "index.m3u8")
	t.Logf("signed playlist %s", h.Get("Location"))

	var p playlist
	testutil.WaitFor(t, 40*time.Second, "three segments", func() bool {
		code, _, b := get(t, http.DefaultClient, signed)
		if code == 200 {
			p = parsePlaylist(t, b)
		}
		return len(p.segments) >= 3
	})
	for i, d := range p.durations {
		if d < 1 || d > 4 {
			t.Errorf("segment %s lasts %.3f s, want about 2", p.segments[i], d)
		}
	}
	seg := p.segments[len(p.segments)-1]
	if code, _, _ := get(t, http.DefaultClient, n.URL()+"/hls/"+s.ID+"/AAAA-forged/"+seg); code != 403 {
		t.Errorf("a segment under a forged prefix: %d, want 403", code)
	}
	// (ServeMux sends a path with dot segments to its clean form: 301.)
	for _, f := range []string{"../../etc/passwd", "..%2f..%2fetc%2fpasswd", "stream.sdp", "index.m3u8.tmp"} {
		if code, _, _ := get(t, noRedirect, prefix+f); code == 200 {
			t.Errorf("%s under the prefix: %d", f, code)
		}
	}

	// ffprobe plays the playlist as a viewer (following the redirect),
	// and reads two segments in a row.
	pr := probe(t, ffprobe, view+"?token="+viewer)
	var codecs []string
	for _, st := range pr.Streams {
		codecs = append(codecs, st.CodecName)
		if st.CodecType == "video" && st.Width != 320 {
			t.Errorf("video %d wide, want 320", st.Width)
		}
	}
	if strings.Join(codecs, ",") != "aac,h264" && strings.Join(codecs, ",") != "h264,aac" {
		t.Errorf("playlist streams %v, want h264 and aac", codecs)
	}
	starts := make([]float64, 2)
	durs := make([]float64, 2)
	for i, sg := range p.segments[len(p.segments)-3 : len(p.segments)-1] {
		path := filepath.Join(t.TempDir(), sg)
		_, _, b := get(t, http.DefaultClient, prefix+sg)
		os.WriteFile(path, b, 0o644)
		out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=start_time,duration", "-of", "csv=p=0", path).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", sg, err)
		}
		f := strings.Split(strings.TrimSpace(string(out)), ",")
		starts[i], _ = strconv.ParseFloat(f[0], 64)
		durs[i], _ = strconv.ParseFloat(f[1], 64)
		sp := probe(t, ffprobe, path)
		if len(sp.Streams) != 2 {
			t.Errorf("segment %s has %d streams", sg, len(sp.Streams))
		}
		if i == 1 {
			// The mix carries the tone: the segment's audio is loud.
			out, _ := exec.Command(ffmpeg, "-hide_banner", "-nostdin", "-i", path, "-map", "0:a", "-af", "volumedetect", "-f", "null", "-").CombinedOutput()
			m := regexp.MustCompile(`mean_volume: (-?[0-9.]+) dB`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("volumedetect: %s", out)
			}
			if v, _ := strconv.ParseFloat(string(m[1]), 64); v < -40 {
				t.Errorf("segment %s: audio at %.1f dB, want the tone", sg, v)
			} else {
				t.Logf("segment %s: audio at %.1f dB", sg, v)
			}
		}
	}
	t.Logf("segments start at %.3f (%.3f s) and %.3f (%.3f s)", starts[0], durs[0], starts[1], durs[1])
	if gap := starts[1] - (starts[0] + durs[0]); gap > 0.2 || gap < -0.2 {
		t.Errorf("the second segment starts %.3f s from the first's end", gap)
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

	// Kill the child: a new one (a new PID) goes on with new segments,
	// after a discontinuity.
	pid := n.hls.PID(s.ID)
	_, _, b := get(t, http.DefaultClient, signed)
	p = parsePlaylist(t, b)
	last := lastSegment(p)
	if pid == 0 {
		t.Fatal("no ffmpeg child")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var newPID int
	testutil.WaitFor(t, 5*time.Second, "a new ffmpeg child", func() bool {
		newPID = n.hls.PID(s.ID)
		return newPID != 0 && newPID != pid
	})
	t.Logf("child %d killed; child %d runs %v later", pid, newPID, time.Since(killed).Round(time.Millisecond))
	testutil.WaitFor(t, 30*time.Second, "segments of the new child", func() bool {
		code, _, b := get(t, http.DefaultClient, signed)
		if code == 200 {
			p = parsePlaylist(t, b)
		}
		r := restartedAfter(p, last)
		return r >= 0 && lastSegment(p) >= r+1
	})
	t.Logf("segments up to %d before the kill; the new child's from %d after a discontinuity, up to %d",
		last, restartedAfter(p, last), lastSegment(p))
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

	// Stop: the stream and its files go.
	if code := callAs(t, ctok, "DELETE", hlsURL, nil, nil); code != 204 {
		t.Errorf("stop: %d, want 204", code)
	}
	if code, _, _ := get(t, noRedirect, view+"?token="+viewer); code != 404 {
		t.Errorf("viewer after stop: %d, want 404", code)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "hls", s.ID)); !os.IsNotExist(err) {
		t.Errorf("the stream's directory is still there: %v", err)
	}
}
