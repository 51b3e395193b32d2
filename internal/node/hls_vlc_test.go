package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestVLCPlaysTheStream: VLC 3.0 (a player without LL-HLS, which does not
// know EXT-X-GAP) opens a viewer link in the stream's first seconds, while
// gohlslib's playlists still open with their gap entries, and plays: the
// video and the Opus mix decode and its clock runs on for seconds, and it
// never asks for a gap (which would stop it at position 0).
func TestVLCPlaysTheStream(t *testing.T) {
	vlc := testutil.NeedBinary(t, "cvlc")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "vlc")
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/hls", map[string]any{}, nil); code != 201 {
		t.Fatalf("starting the stream: %d", code)
	}
	url := n.URL() + "/hls/" + s.ID + "/index.m3u8?token=" + joinToken(t, n, s.ID, "viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, vlc, "-vv", "--aout=adummy", "--vout=dummy", "--no-video-title-show",
		"--play-and-exit", "--run-time=12", url)
	if os.Geteuid() == 0 { // VLC refuses to run as root
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	cmd.Env = append(os.Environ(), "HOME="+os.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	log := out.String()
	gets := regexp.MustCompile(`GET /hls/\S+/(\S+) HTTP`).FindAllStringSubmatch(log, -1)
	var asked []string
	segs := map[string]int{}
	for _, g := range gets {
		asked = append(asked, g[1])
		for _, kind := range []string{"video", "audio"} {
			if strings.Contains(g[1], "_"+kind) && strings.Contains(g[1], "_seg") {
				segs[kind]++
			}
		}
	}
	var times []int64
	for _, m := range regexp.MustCompile(`cached\.i_time \((\d+)\)`).FindAllStringSubmatch(log, -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		times = append(times, v)
	}
	played := time.Duration(0)
	if len(times) > 0 {
		played = time.Duration(times[len(times)-1]-times[0]) * time.Microsecond
	}
	t.Logf("VLC asked for %d files (%d video and %d audio segments), played %v", len(asked), segs["video"], segs["audio"], played)
	for _, a := range asked {
		if strings.Contains(a, "gap") {
			t.Errorf("VLC asked for %s", a)
		}
	}
	for _, want := range []string{`using video decoder module "avcodec"`, `using audio decoder module "opus"`} {
		if !strings.Contains(log, want) {
			t.Errorf("VLC's log lacks %s", want)
		}
	}
	if segs["video"] < 3 || segs["audio"] < 3 || played < 3*time.Second {
		t.Errorf("VLC fetched %d video and %d audio segments and played %v, want 3 of each and 3 s; asked for %v",
			segs["video"], segs["audio"], played, asked)
	}
}
