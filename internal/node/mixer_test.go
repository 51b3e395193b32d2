package node

import (
	"encoding/binary"
	"fmt"
	"math"
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
			if sh := audio.WindowedToneShare(x, f, 8000); sh < 0.25 {
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

// pcmuTone sends 20 ms PCMU frames of a tone from c to dst until stop;
// between frames it sends what noise returns (bad input), if set.
func pcmuTone(c *net.UDPConn, dst *net.UDPAddr, freq float64, stop <-chan struct{}, noise func(i int) [][]byte) {
	var phase float64
	ssrc := uint32(time.Now().UnixNano())
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		pcm := make([]int16, 160)
		for j := range pcm {
			pcm[j] = int16(8000 * math.Sin(phase))
			phase += 2 * math.Pi * freq / 8000
		}
		b := make([]byte, 12+160)
		b[0], b[1] = 0x80, 0
		binary.BigEndian.PutUint16(b[2:], uint16(i))
		binary.BigEndian.PutUint32(b[4:], uint32(i*160))
		binary.BigEndian.PutUint32(b[8:], ssrc)
		audio.EncodeMulaw(b[12:], pcm)
		_, _ = c.WriteToUDP(b, dst)
		if noise != nil {
			for _, p := range noise(i) {
				_, _ = c.WriteToUDP(p, dst)
			}
		}
	}
}

// arrival is a PCMU packet heard and when.
type arrival struct {
	at  time.Time
	pcm []int16
}

// listen collects the PCMU c hears until stop.
func listen(c *net.UDPConn, stop <-chan struct{}) <-chan []arrival {
	done := make(chan []arrival, 1)
	go func() {
		var got []arrival
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				done <- got
				return
			default:
			}
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			n, err := c.Read(buf)
			if err != nil || n <= 12 || buf[1]&0x7f != 0 {
				continue
			}
			pcm := make([]int16, n-12)
			audio.DecodeMulaw(pcm, buf[12:n])
			got = append(got, arrival{time.Now(), pcm})
		}
	}()
	return done
}

func joined(as []arrival) []int16 {
	var x []int16
	for _, a := range as {
		x = append(x, a.pcm...)
	}
	return x
}

// speakerAndListener makes a session with Ada speaking 440 Hz from a Go
// socket and Cy hearing the mix on another; it returns the session, Cy's
// ear and the way to stop Ada.
func speakerAndListener(t *testing.T, n *Node, noise func(int) [][]byte) (sessionJSON, *net.UDPConn, func()) {
	t.Helper()
	s := createSession(t, n, "mix")
	ada, _ := joinMember(t, n, s.ID, "Ada")
	cy, _ := joinMember(t, n, s.ID, "Cy")
	ear := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": ear.LocalAddr().String(), "remote_rtcp": udpConn(t).LocalAddr().String(),
		"kind": "audio", "direction": "recvonly", "member": cy, "mix": "PCMU"})
	mouth := udpConn(t)
	local := addLink(t, n, s.ID, map[string]any{"remote": mouth.LocalAddr().String(), "kind": "audio",
		"direction": "sendrecv", "member": ada, "mix": "PCMU;telephone-event=101"})
	stop := make(chan struct{})
	go pcmuTone(mouth, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: local.Local.RTPPort}, 440, stop, noise)
	var once sync.Once
	return s, ear, func() { once.Do(func() { close(stop) }) }
}

// TestKilledMixerComesBack: the mixer of a live session crashes; the
// supervisor sees its reports stand still on NATS and starts another,
// and the listener hears the speaker again, without rejoining.
func TestKilledMixerComesBack(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s, ear, quiet := speakerAndListener(t, n, nil)
	defer quiet()
	stop := make(chan struct{})
	heard := listen(ear, stop)
	time.Sleep(1500 * time.Millisecond)
	if !n.mixers.Crash(s.ID, "") {
		t.Fatal("the session has no mixer")
	}
	crashed := time.Now()
	time.Sleep(4 * time.Second)
	close(stop)
	as := <-heard
	var before, after []arrival
	var gap time.Duration
	for i, a := range as {
		if a.at.Before(crashed) {
			before = append(before, a)
			continue
		}
		after = append(after, a)
		if i > 0 {
			gap = max(gap, a.at.Sub(as[i-1].at))
		}
	}
	if len(before) < 25 {
		t.Fatalf("Cy heard %d packets before the crash", len(before))
	}
	if len(after) < 50 {
		t.Fatalf("Cy heard %d packets in the 4 s after the crash: the mixer did not come back (restarts %v)",
			len(after), metricValue(t, n, `convene_service_restarts_total{kind="mixer"}`))
	}
	t.Logf("the mix stopped for %v", gap)
	if sh := audio.WindowedToneShare(joined(after[len(after)-50:]), 440, 8000); sh < 0.25 {
		t.Errorf("after the restart Cy hears 440 Hz at %.2f of the energy", sh)
	}
	if v := metricValue(t, n, `convene_service_restarts_total{kind="mixer"}`); v != 1 {
		t.Errorf("restarts %v, want 1", v)
	}
	if v := metricValue(t, n, "convene_mixer_crashes_total"); v != 1 {
		t.Errorf("crashes %v, want 1", v)
	}
	if v := metricValue(t, n, "convene_mixers"); v != 1 {
		t.Errorf("convene_mixers = %v, want 1", v)
	}
}

// TestMixedSessionShrugsOffBadInput: a member's phone sends garbage,
// RTP of payload types it never offered, truncated RTP, and a flood of
// RFC 4733 digits along with its voice; the listener still hears it, the
// bad packets are counted by reason, and the flood of *6 toggles its
// mute at most twice a second.
func TestMixedSessionShrugsOffBadInput(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	noise := func(i int) [][]byte {
		garbage := []byte("this is not RTP at all")
		wrongPT := make([]byte, 12+160)
		wrongPT[0], wrongPT[1] = 0x80, 18 // G.729, never offered
		binary.BigEndian.PutUint16(wrongPT[2:], uint16(i))
		truncated := []byte{0x80, 0x00, 0x01}
		var digits [][]byte
		for _, d := range []byte{10, 6} { // '*', '6': RFC 4733 events
			ev := make([]byte, 16)
			ev[0], ev[1] = 0x80, 0x80|101
			binary.BigEndian.PutUint16(ev[2:], uint16(i))
			binary.BigEndian.PutUint32(ev[4:], uint32(i*160)+uint32(d))
			ev[12], ev[13] = d, 0x80|10 // end of event
			binary.BigEndian.PutUint16(ev[14:], 800)
			digits = append(digits, ev)
		}
		return append([][]byte{garbage, wrongPT, truncated}, digits...)
	}
	_, ear, quiet := speakerAndListener(t, n, noise)
	defer quiet()
	stop := make(chan struct{})
	heard := listen(ear, stop)
	time.Sleep(4 * time.Second)
	quiet()
	close(stop)
	as := <-heard
	if len(as) < 100 {
		t.Fatalf("Cy heard %d packets in 4 s", len(as))
	}
	// Ada is muted for half of the time at most (*6 toggles): count the
	// frames that carry her tone.
	toned := 0
	for _, a := range as {
		if audio.ToneShare(a.pcm, 440, 8000) > 0.5 {
			toned++
		}
	}
	t.Logf("%d of %d frames carry Ada's tone", toned, len(as))
	if toned < 40 || toned > len(as)-40 {
		t.Errorf("Cy heard Ada's tone in %d frames of %d: want her muted and unmuted by the flood of *6", toned, len(as))
	}
	for _, r := range []string{"payload_type", "malformed"} {
		v := metricValue(t, n, `convene_mixer_dropped_packets_total{reason="`+r+`"}`)
		t.Logf("dropped %s: %v", r, v)
	}
	if v := metricValue(t, n, `convene_mixer_dropped_packets_total{reason="payload_type"}`); v < 50 || v > 250 {
		t.Errorf("packets of a payload type never offered: %v counted, want about 200 (digits are not among them)", v)
	}
	if v := metricValue(t, n, "convene_mixer_crashes_total"); v != 0 {
		t.Errorf("crashes %v", v)
	}
}
