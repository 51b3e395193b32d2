package node

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/testutil"
)

// heardPCMU collects the PCMU a socket receives for d, decoded.
func heardPCMU(c *net.UDPConn, d time.Duration) []int16 {
	var pcm []int16
	buf := make([]byte, 2048)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		c.SetReadDeadline(end)
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		if n <= 12 || buf[1]&0x7f != 0 {
			continue
		}
		out := make([]int16, n-12)
		audio.DecodeMulaw(out, buf[12:n])
		pcm = append(pcm, out...)
	}
	return pcm
}

// TestMixedLinksHearTheOthers: two members talk through ffmpeg (440 Hz and
// 1 kHz, PCMU); each member's mixed link hears the other's tone and not
// its own, and a third member hears both, as one PCMU stream each. A mix
// in a codec the node does not have, or on video, is refused.
func TestMixedLinksHearTheOthers(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "mix")
	tones := map[string]float64{}
	ears := map[string]*net.UDPConn{}
	var senders []*exec.Cmd
	var local linkJSON
	for _, name := range []string{"Ada", "Bob", "Cy"} {
		id, _ := joinMember(t, n, s.ID, name)
		ear := udpConn(t)
		ears[name] = ear
		addLink(t, n, s.ID, map[string]any{"remote": ear.LocalAddr().String(), "remote_rtcp": udpConn(t).LocalAddr().String(),
			"kind": "audio", "direction": "recvonly", "member": id, "mix": "PCMU"})
		if name == "Cy" {
			continue // listens only
		}
		src := freePortPair(t)
		local = addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio",
			"direction": "sendonly", "member": id})
		tones[name] = map[string]float64{"Ada": 440, "Bob": 1000}[name]
		out := fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", local.Local.RTPPort, src, src+1)
		cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi",
			"-i", fmt.Sprintf("sine=frequency=%v:duration=4", tones[name]),
			"-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", out)
		cmd.Stderr = os.Stderr
		senders = append(senders, cmd)
	}
	for _, cmd := range senders {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	heard := map[string][]int16{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, ear := range ears {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pcm := heardPCMU(ear, 3500*time.Millisecond)
			mu.Lock()
			heard[name] = pcm
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, cmd := range senders {
		_ = cmd.Wait()
	}
	check := func(who string, want, not []float64) {
		t.Helper()
		x := heard[who]
		if len(x) < 8000*2 {
			t.Fatalf("%s heard %d samples in 3.5 s", who, len(x))
		}
		x = x[8000:] // past the start
		for _, f := range want {
			if sh := audio.ToneShare(x, f, 8000); sh < 0.25 {
				t.Errorf("%s: %v Hz holds %.2f of what it hears, want it there", who, f, sh)
			}
		}
		for _, f := range not {
			if sh := audio.ToneShare(x, f, 8000); sh > 0.02 {
				t.Errorf("%s: %v Hz holds %.2f of what it hears, want it gone", who, f, sh)
			}
		}
	}
	for _, r := range []string{"malformed", "payload_type", "undecodable", "unknown_codec"} {
		t.Logf("dropped %s: %v", r, metricValue(t, n, `convene_mixer_dropped_packets_total{reason="`+r+`"}`))
	}
	t.Logf("frames: %v", metricValue(t, n, "convene_mixer_frames_encoded_total"))
	var sess sessionJSON
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
	for _, l := range sess.Links {
		t.Logf("link %s in %d", l.ID, l.Stats.PacketsIn)
	}
	check("Ada", []float64{1000}, []float64{440})
	check("Bob", []float64{440}, []float64{1000})
	check("Cy", []float64{440, 1000}, nil)
	if v := metricValue(t, n, "convene_mixers"); v != 1 {
		t.Errorf("convene_mixers = %v, want 1", v)
	}

	for _, bad := range []map[string]any{
		{"remote": "127.0.0.1:9", "kind": "audio", "mix": "G729"},
		{"remote": "127.0.0.1:9", "kind": "video", "mix": "PCMU"},
	} {
		var e map[string]any
		if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/rtp-links", bad, &e); code != 400 {
			t.Errorf("link %v: %d %v, want 400", bad, code, e)
		}
	}
}
