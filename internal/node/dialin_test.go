package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// TestPhonesDialIntoASession: two real phones (baresip, a 440 Hz and a
// 1 kHz tone as their microphones) dial sip:<session>@node with their
// accounts. Each becomes a member, hears the other's tone and not its own;
// a browser member (pion, Opus) receives both phones and the phones hear
// its tone in their PCMU mix; a mixed plain RTP listener hears all three;
// hanging up (BYE) leaves.
func TestPhonesDialIntoASession(t *testing.T) {
	testutil.NeedBinary(t, "baresip")
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "convene.test"
	cfg.SIP.Algorithms = "MD5" // baresip 1.0 knows only MD5
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const pass = "long-enough-pass-123"
	for _, u := range []string{"alice", "bobby"} {
		if _, err := n.sipUsers.Add(ctx, u, pass); err != nil {
			t.Fatal(err)
		}
	}
	s := createSession(t, n, "dial-in")
	ear := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": ear.LocalAddr().String(), "remote_rtcp": udpConn(t).LocalAddr().String(),
		"kind": "audio", "direction": "recvonly", "mix": "PCMU"})
	dial := "/dial sip:" + s.ID + "@" + n.SIPAddr()
	phones := map[string]*testutil.Baresip{}
	for user, tone := range map[string]int{"alice": 440, "bobby": 1000} {
		phones[user] = testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: user, Password: pass, Domain: "convene.test",
			Proxy: n.SIPAddr(), Tone: tone, QuitAfter: 9 * time.Second, Commands: []string{dial}})
	}
	testutil.WaitFor(t, 15*time.Second, "both phones in the session", func() bool {
		return metricValue(t, n, `convene_sip_calls_total{result="conference"}`) == 2
	})
	var got struct{ Members []struct{ ID, Name string } }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &got)
	if len(got.Members) != 2 {
		t.Fatalf("members %v, want the two phones", got.Members)
	}
	// A browser member (pion, real Opus of a 1.5 kHz tone) joins: it
	// receives both phones, and the phones hear it in their mix.
	_, wtok := joinMember(t, n, s.ID, "Web")
	web := dialRTC(t, n, s.ID, wtok, rtctest.Options{Audio: true, Tone: 1500, Decode: true})
	testutil.WaitFor(t, 10*time.Second, "the browser to receive both phones", func() bool {
		streams := 0
		for _, r := range web.Received() {
			if r.Kind == "audio" && r.Packets.Load() >= 100 {
				streams++
			}
		}
		return streams == 2
	})
	// The phones' G.711 reaches the browser transcoded: Opus, each phone's
	// tone on a track of its own.
	tones := map[float64]bool{}
	for _, r := range web.Received() {
		if r.Kind != "audio" {
			continue
		}
		if !strings.EqualFold(r.Codec, "audio/opus") {
			t.Errorf("the browser receives a phone in %q, want audio/opus", r.Codec)
			continue
		}
		pcm := r.PCM()
		pcm = pcm[len(pcm)/2:]
		for _, f := range []float64{440, 1000} {
			if audio.ToneShare(pcm, f, 48000) > 0.5 {
				tones[f] = true
			}
		}
	}
	if !tones[440] || !tones[1000] {
		t.Errorf("the browser decodes the phones' tones %v, want 440 and 1000 Hz", tones)
	}
	// Shares over 100 ms windows: a mixer starved of CPU (-race on a busy
	// machine) misses ticks (convene_mixer_missed_ticks_total), and the
	// 20 ms gaps break a 440 Hz tone's phase (8.8 cycles a frame), which a
	// share over the whole recording counts as its absence.
	heard := heardPCMU(ear, 3*time.Second)
	for _, f := range []float64{440, 1000, 1500} {
		if sh := audio.WindowedToneShare(heard[len(heard)/4:], f, 8000); sh < 0.05 { // present; an absent tone is under 0.01
			t.Errorf("the listener: %v Hz holds %.2f of what it hears", f, sh)
		}
	}
	for _, p := range phones {
		_ = p.Cmd.Wait() // baresip quits after 9 s and hangs up first
	}
	testutil.WaitFor(t, 10*time.Second, "the phones to leave", func() bool {
		var ms struct{ Members []map[string]any }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &ms)
		return len(ms.Members) == 1 // the browser stays
	})
	for user, want := range map[string][2]float64{"alice": {1000, 440}, "bobby": {440, 1000}} {
		var pcm []int16
		rate := 8000
		for _, w := range phones[user].Decoded(t) {
			if len(w.PCM) > len(pcm) {
				pcm, rate = w.PCM, w.Rate
			}
		}
		if len(pcm) < rate*2 {
			t.Fatalf("%s decoded %d samples at %d Hz", user, len(pcm), rate)
		}
		pcm = pcm[rate:] // past the first second
		t.Logf("%s heard %.1f s: %v Hz %.2f, %v Hz %.2f (windowed)", user, float64(len(pcm))/float64(rate),
			want[0], audio.WindowedToneShare(pcm, want[0], rate), want[1], audio.WindowedToneShare(pcm, want[1], rate))
		if sh := audio.WindowedToneShare(pcm, want[0], rate); sh < 0.2 {
			t.Errorf("%s: the other phone's %v Hz holds %.2f of what it hears", user, want[0], sh)
		}
		if sh := audio.WindowedToneShare(pcm, want[1], rate); sh > 0.05 {
			t.Errorf("%s: its own %v Hz holds %.2f of what it hears", user, want[1], sh)
		}
		if sh := audio.WindowedToneShare(pcm, 1500, rate); sh < 0.05 {
			t.Errorf("%s: the browser's 1.5 kHz (Opus, transcoded into its PCMU mix) holds %.2f of what it hears", user, sh)
		}
	}
}

// TestPhoneTakesTheFloorWithDTMF: a SIPp phone dials into a session under
// floor control, speaks, and presses *1 (RFC 4733, SIPp's recorded
// events): it then holds the audio floor and is played the floor tone;
// *6 then mutes it. Hanging up gives the floor back.
func TestPhoneTakesTheFloorWithDTMF(t *testing.T) {
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "floor by phone")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	if code := call(t, "PUT", base+"/floors/audio", map[string]any{"style": "floor_control", "auto": true}, nil); code != 200 {
		t.Fatalf("style: %d", code)
	}
	phone := startSIPp(t, ctx, n, "dialin_dtmf.xml", s.ID)
	holder := func() string {
		var st struct {
			Tokens []struct {
				Holder string `json:"holder"`
			} `json:"tokens"`
		}
		call(t, "GET", base+"/floors/audio", nil, &st)
		for _, tok := range st.Tokens {
			if tok.Holder != "" {
				return tok.Holder
			}
		}
		return ""
	}
	testutil.WaitFor(t, 15*time.Second, "the phone to hold the audio floor after *1", func() bool { return holder() != "" })
	var m struct {
		Name string `json:"name"`
	}
	call(t, "GET", base+"/members/"+holder(), nil, &m)
	if !strings.HasPrefix(m.Name, "carol") {
		t.Fatalf("the floor holder is %q, want the phone", m.Name)
	}
	if v := metricValue(t, n, "convene_mixer_floor_tones_total"); v != 1 {
		t.Errorf("floor tones played: %v, want 1 (the phone hears that it may speak)", v)
	}
	// *6 mutes the phone: its track is gated although it holds the floor.
	testutil.WaitFor(t, 15*time.Second, "the phone's track to be muted after *6", func() bool {
		var sess struct {
			Tracks []struct {
				Gated bool   `json:"gated"`
				Link  string `json:"link"`
			} `json:"tracks"`
		}
		call(t, "GET", base, nil, &sess)
		return len(sess.Tracks) == 1 && sess.Tracks[0].Gated && holder() != ""
	})
	phone.wait(t)
	testutil.WaitFor(t, 5*time.Second, "the floor to be free after the phone hung up", func() bool { return holder() == "" })
}

// TestWidebandPhones: two baresip phones dial a session in G.722 (16 kHz
// audio); one says 440 Hz, the other 6 kHz, a tone no G.711 path carries
// (its band ends at 4 kHz). Each hears the other's tone in its wideband mix
// and not its own.
func TestWidebandPhones(t *testing.T) {
	n, ctx := newBaresipNode(t, "alice", "bobby")
	s := createSession(t, n, "wideband")
	dial := "/dial sip:" + s.ID + "@" + n.SIPAddr()
	phones := map[string]*testutil.Baresip{}
	for user, tone := range map[string]int{"alice": 440, "bobby": 6000} {
		phones[user] = testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: user, Password: carolPass, Domain: "convene.test",
			Proxy: n.SIPAddr(), Tone: tone, Codecs: "G722/16000/1", QuitAfter: 8 * time.Second, Commands: []string{dial}})
	}
	for _, p := range phones {
		_ = p.Cmd.Wait()
	}
	for user, want := range map[string][2]float64{"alice": {6000, 440}, "bobby": {440, 6000}} {
		var pcm []int16
		rate := 0
		for _, w := range phones[user].Decoded(t) {
			if len(w.PCM) > len(pcm) {
				pcm, rate = w.PCM, w.Rate
			}
		}
		if rate != 16000 || len(pcm) < 3*rate {
			t.Fatalf("%s decoded %d samples at %d Hz, want G.722's 16 kHz\n%s", user, len(pcm), rate, phones[user].Output())
		}
		pcm = pcm[2*rate:]
		other, own := audio.ToneShare(pcm, want[0], rate), audio.ToneShare(pcm, want[1], rate)
		t.Logf("%s hears %v Hz %.2f, its own %v Hz %.2f", user, want[0], other, want[1], own)
		if other < 0.2 {
			t.Errorf("%s: the other phone's %v Hz holds %.2f of what it hears", user, want[0], other)
		}
		if own > 0.05 {
			t.Errorf("%s: its own %v Hz holds %.2f of what it hears", user, want[1], own)
		}
	}
}

// TestBaresipTakesTheFloorWithDTMF: a real phone (baresip) dials a
// session under floor control and presses * and 1 (RFC 4733 events,
// through its menu's sndcode): it then holds the audio floor, and its
// voice, gated before, is forwarded.
func TestBaresipTakesTheFloorWithDTMF(t *testing.T) {
	n, ctx := newBaresipNode(t, "alice")
	s := createSession(t, n, "floor by baresip")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	if code := call(t, "PUT", base+"/floors/audio", map[string]any{"style": "floor_control", "auto": true}, nil); code != 200 {
		t.Fatalf("style: %d", code)
	}
	phone := testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: "alice", Password: carolPass, Domain: "convene.test",
		Proxy: n.SIPAddr(), Tone: 440, QuitAfter: 20 * time.Second, Commands: []string{"/dial sip:" + s.ID + "@" + n.SIPAddr()}})
	// gated: the phone's voice arrives (its link's packets) and its
	// track is gated; forwarded: the track has forwarded packets.
	state := func() (heard, gated bool, forwarded uint64) {
		var sess struct {
			Links  []linkJSON `json:"links"`
			Tracks []struct {
				Gated   bool   `json:"gated"`
				Packets uint64 `json:"packets"`
			} `json:"tracks"`
		}
		call(t, "GET", base, nil, &sess)
		if len(sess.Links) != 1 || len(sess.Tracks) != 1 {
			return false, false, 0
		}
		return sess.Links[0].Stats.PacketsIn > 20, sess.Tracks[0].Gated, sess.Tracks[0].Packets
	}
	testutil.WaitFor(t, 15*time.Second, "the phone's voice, gated without the floor", func() bool {
		heard, gated, fwd := state()
		return heard && gated && fwd == 0
	})
	for _, key := range []string{"*", "1"} {
		if out, err := phone.Command("sndcode", key); err != nil {
			t.Fatalf("baresip sndcode %s: %v (%s)\n%s", key, err, out, phone.Output())
		}
		time.Sleep(300 * time.Millisecond) // a key is an event of its own
	}
	testutil.WaitFor(t, 10*time.Second, "the phone to hold the floor after *1, its voice forwarded", func() bool {
		var st struct {
			Tokens []struct {
				Holder string `json:"holder"`
			} `json:"tokens"`
		}
		call(t, "GET", base+"/floors/audio", nil, &st)
		held := len(st.Tokens) > 0 && st.Tokens[0].Holder != ""
		_, gated, fwd := state()
		return held && !gated && fwd > 20
	})
}

// TestPhoneBehindNATIsLatched: a SIPp phone's SDP names a private address
// (10.11.12.13:4000) while its media comes from a socket on 127.0.0.1,
// where its SIP comes from, as a phone behind NAT does. The phone's link
// learns that source from the first packets: the session hears the phone
// and the phone hears the mix (the speaker's 440 Hz). Without latching the
// node counts its packets as from an unknown source and sends it nothing.
func TestPhoneBehindNATIsLatched(t *testing.T) {
	n, ctx := newSIPpNode(t)
	s, _, stop := speakerAndListener(t, n, nil)
	defer stop()
	phone := startSIPp(t, ctx, n, "dialin_nat.xml", s.ID)
	phoneLink := func() (l linkJSON) {
		var sess sessionJSON
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, x := range sess.Links {
			if x.Remote == "10.11.12.13:4000" { // what its SDP said
				l = x
			}
		}
		return l
	}
	testutil.WaitFor(t, 15*time.Second, "the phone to join", func() bool { return phoneLink().ID != "" })
	// The phone's media, from the NAT's side: 1 kHz to the node's RTP port.
	nat := udpConn(t)
	speak := make(chan struct{})
	defer close(speak)
	go pcmuTone(nat, net.UDPAddrFromAddrPort(n.socks.RTP.LocalAddr()), 1000, speak, nil)
	heard := heardPCMU(nat, 3*time.Second)
	if len(heard) < 8000 {
		t.Fatalf("the phone behind NAT heard %d samples of the mix in 3 s", len(heard))
	}
	if sh := audio.WindowedToneShare(heard[len(heard)/2:], 440, 8000); sh < 0.2 { // as the other phone tests: 0.00 when absent
		t.Errorf("the phone behind NAT hears the speaker's 440 Hz at %.2f of the energy", sh)
	}
	if l := phoneLink(); l.Stats.PacketsIn < 50 {
		t.Errorf("the session heard %d packets of the phone behind NAT", l.Stats.PacketsIn)
	}
	if v := metricValue(t, n, `convene_media_latched_total{socket="rtp"}`); v != 1 {
		t.Errorf("RTP sources latched: %v, want the phone's 1", v)
	}
	phone.wait(t)
}

// TestPhoneSubscribesToTheRoster: a SIPp phone subscribes to a session's
// conference events (RFC 4575) with its account; its first NOTIFY names
// the member there, the next the member who joined, and unsubscribing
// ends with a terminated NOTIFY (the scenario fails otherwise).
func TestPhoneSubscribesToTheRoster(t *testing.T) {
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "roster")
	joinMember(t, n, s.ID, "Ada")
	phone := startSIPp(t, ctx, n, "conf_events.xml", s.ID)
	time.Sleep(1500 * time.Millisecond) // the first NOTIFY goes out
	joinMember(t, n, s.ID, "Grace")
	phone.wait(t)
}

// sippPhone is a node with the SIP account carol, and a SIPp phone of it
// ready to run a scenario of testdata against a session.
type sippPhone struct {
	cmd *exec.Cmd
	out testutil.Buffer // SIPp's stdout and stderr
}

const carolPass = "long-enough-pass-123"

func newSIPpNode(t *testing.T) (*Node, context.Context) {
	t.Helper()
	testutil.NeedBinary(t, "sipp")
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "convene.test"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if _, err := n.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	return n, ctx
}

// startSIPp runs scenario (testdata) as carol against session.
func startSIPp(t *testing.T, ctx context.Context, n *Node, scenario, session string) *sippPhone {
	t.Helper()
	return startSIPpAs(t, ctx, n, scenario, session, "carol", carolPass, 30*time.Second)
}

// startSIPpAs runs scenario as the digest user user with password pass,
// with extra SIPp arguments.
// A refused call ends at timeout.
func startSIPpAs(t *testing.T, ctx context.Context, n *Node, scenario, session, user, pass string, timeout time.Duration, extra ...string) *sippPhone {
	t.Helper()
	return startSIPpTo(t, ctx, n.SIPAddr(), scenario, session, user, pass, timeout, extra...)
}

// startSIPpTo is startSIPpAs against the SIP server at addr.
func startSIPpTo(t *testing.T, ctx context.Context, addr, scenario, session, user, pass string, timeout time.Duration, extra ...string) *sippPhone {
	t.Helper()
	sf, _ := filepath.Abs(filepath.Join("testdata", scenario))
	p := &sippPhone{}
	args := []string{"-sf", sf, "-s", session, "-set", "domain", "convene.test",
		"-au", user, "-ap", pass, "-auth_uri", session + "@convene.test", "-nostdin", "-i", "127.0.0.1",
		"-p", strconv.Itoa(freePortPair(t)), "-mp", strconv.Itoa(freePortPair(t)),
		"-m", "1", "-timeout", strconv.Itoa(int(timeout/time.Second)) + "s", "-timeout_error"}
	p.cmd = exec.CommandContext(ctx, testutil.NeedBinary(t, "sipp"), append(append(args, extra...), addr)...)
	p.cmd.Dir = t.TempDir()
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// messages is the SIP SIPp sent and received, when it ran with
// -trace_msg.
func (p *sippPhone) messages(t *testing.T) string {
	t.Helper()
	fs, _ := filepath.Glob(filepath.Join(p.cmd.Dir, "*_messages.log"))
	if len(fs) != 1 {
		t.Fatalf("SIPp message traces %v, want one (-trace_msg)", fs)
	}
	b, err := os.ReadFile(fs[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (p *sippPhone) wait(t *testing.T) {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("sipp: %v\n%s", err, p.out.String())
	}
}

// TestPhoneInASubgroupHearsItsMix: a phone (baresip) in a session whose
// member is moved to a subgroup hears that subgroup's talker (1 kHz) and
// no longer the main session's (440 Hz); both talk through ffmpeg.
func TestPhoneInASubgroupHearsItsMix(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newBaresipNode(t, "alice")
	s := createSession(t, n, "subgroup mix")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	var talkers []*exec.Cmd
	ids := map[float64]string{}
	for _, tone := range []float64{440, 1000} {
		id, _ := joinMember(t, n, s.ID, fmt.Sprintf("talker %v", tone))
		ids[tone] = id
		src := freePortPair(t)
		l := addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio",
			"direction": "sendonly", "member": id})
		out := fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", l.Local.RTPPort, src, src+1)
		talkers = append(talkers, exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi",
			"-i", fmt.Sprintf("sine=frequency=%v:duration=9", tone), "-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", out))
	}
	var g struct{ ID string }
	if code := call(t, "POST", base+"/subgroups", map[string]any{"name": "side", "members": []string{ids[1000]}}, &g); code != 201 {
		t.Fatalf("subgroup: %d", code)
	}
	for _, c := range talkers {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	phone := testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: "alice", Password: carolPass, Domain: "convene.test",
		Proxy: n.SIPAddr(), Tone: 2000, QuitAfter: 8 * time.Second, Commands: []string{"/dial sip:" + s.ID + "@" + n.SIPAddr()}})
	var phoneID string
	testutil.WaitFor(t, 15*time.Second, "the phone in the session", func() bool {
		var ms struct{ Members []struct{ ID, Name string } }
		call(t, "GET", base+"/members", nil, &ms)
		for _, m := range ms.Members {
			if strings.HasSuffix(m.Name, "(phone)") {
				phoneID = m.ID
			}
		}
		return phoneID != ""
	})
	if code := call(t, "PUT", base+"/members/"+phoneID+"/subgroup", map[string]any{"subgroup": g.ID}, nil); code != 200 {
		t.Fatalf("move the phone: %d", code)
	}
	_ = phone.Cmd.Wait()
	for _, c := range talkers {
		_ = c.Wait()
	}
	var pcm []int16
	rate := 8000
	for _, w := range phone.Decoded(t) {
		if len(w.PCM) > len(pcm) {
			pcm, rate = w.PCM, w.Rate
		}
	}
	if len(pcm) < 5*rate {
		t.Fatalf("the phone decoded %d samples at %d Hz", len(pcm), rate)
	}
	tail := pcm[len(pcm)-3*rate:] // the last 3 s, well after the move
	t.Logf("the phone in the subgroup: 1 kHz %.2f, 440 Hz %.2f", audio.ToneShare(tail, 1000, rate), audio.ToneShare(tail, 440, rate))
	if sh := audio.ToneShare(tail, 1000, rate); sh < 0.5 {
		t.Errorf("the subgroup's 1 kHz holds %.2f of what the phone hears", sh)
	}
	if sh := audio.ToneShare(tail, 440, rate); sh > 0.02 {
		t.Errorf("the main session's 440 Hz holds %.2f of what the phone in the subgroup hears", sh)
	}
}

// TestGuestDialsInWithThePIN: the chair makes a session PIN (shown once);
// a phone without an account dials in as "guest" with it and becomes a
// member; a wrong PIN, or any PIN once it is deleted, joins nothing.
func TestGuestDialsInWithThePIN(t *testing.T) {
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "guests")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	var pin struct{ PIN, Username, URI string }
	if code := call(t, "POST", base+"/pin", nil, &pin); code != 201 || len(pin.PIN) != 8 || pin.Username != "guest" {
		t.Fatalf("pin: %d %+v", code, pin)
	}
	members := func() int {
		var ms struct{ Members []map[string]any }
		call(t, "GET", base+"/members", nil, &ms)
		return len(ms.Members)
	}
	wrong := startSIPpAs(t, ctx, n, "dialin_dtmf.xml", s.ID, "guest", "00000000", 3*time.Second)
	if err := wrong.cmd.Wait(); err == nil {
		t.Fatalf("a wrong PIN was let in:\n%s", wrong.out.String())
	}
	if m := members(); m != 0 {
		t.Fatalf("%d members after a wrong PIN", m)
	}
	guest := startSIPpAs(t, ctx, n, "dialin_dtmf.xml", s.ID, "guest", pin.PIN, 30*time.Second)
	testutil.WaitFor(t, 10*time.Second, "the guest in the session", func() bool { return members() == 1 })
	guest.wait(t)
	if code := call(t, "DELETE", base+"/pin", nil, nil); code != 204 {
		t.Fatalf("delete pin: %d", code)
	}
	late := startSIPpAs(t, ctx, n, "dialin_dtmf.xml", s.ID, "guest", pin.PIN, 3*time.Second)
	if err := late.cmd.Wait(); err == nil {
		t.Fatalf("a deleted PIN was let in:\n%s", late.out.String())
	}
}

// TestChairCallsAPhoneIn: the chair makes the node call a registered
// phone (baresip, answering by itself, a 1 kHz tone) into the session; it
// joins as a member, a mixed listener hears it, and it hears the session
// (an ffmpeg talker at 440 Hz). Calling an account with no phone is 409.
func TestChairCallsAPhoneIn(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newBaresipNode(t, "bob", "nobody")
	s := createSession(t, n, "call out")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	bob := testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: "bob", Password: carolPass, Domain: "convene.test",
		Proxy: n.SIPAddr(), Tone: 1000, QuitAfter: 12 * time.Second})
	testutil.WaitFor(t, 10*time.Second, "bob to register", func() bool {
		return metricValue(t, n, "convene_sip_registrations") >= 1
	})
	var e map[string]any
	if code := call(t, "POST", base+"/calls", map[string]string{"user": "nobody"}, &e); code != 409 {
		t.Fatalf("calling an account with no phone: %d %v", code, e)
	}
	ear := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": ear.LocalAddr().String(), "remote_rtcp": udpConn(t).LocalAddr().String(),
		"kind": "audio", "direction": "recvonly", "mix": "PCMU"})
	tid, _ := joinMember(t, n, s.ID, "talker")
	src := freePortPair(t)
	l := addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio", "direction": "sendonly", "member": tid})
	talker := exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "sine=frequency=440:duration=8",
		"-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp",
		fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", l.Local.RTPPort, src, src+1))
	if err := talker.Start(); err != nil {
		t.Fatal(err)
	}
	var c struct {
		CallID string `json:"call_id"`
	}
	if code := call(t, "POST", base+"/calls", map[string]string{"user": "bob"}, &c); code != 202 || c.CallID == "" {
		t.Fatalf("call bob: %d %+v", code, c)
	}
	testutil.WaitFor(t, 15*time.Second, "bob to answer and join", func() bool {
		var ms struct{ Members []struct{ Name string } }
		call(t, "GET", base+"/members", nil, &ms)
		for _, m := range ms.Members {
			if m.Name == "bob (phone)" {
				return true
			}
		}
		return false
	})
	heard := heardPCMU(ear, 3*time.Second)
	if sh := audio.ToneShare(heard[len(heard)/3:], 1000, 8000); sh < 0.05 {
		t.Errorf("the listener hears bob's 1 kHz at %.2f", sh)
	}
	_ = talker.Wait()
	_ = bob.Cmd.Wait()
	var pcm []int16
	rate := 8000
	for _, w := range bob.Decoded(t) {
		if len(w.PCM) > len(pcm) {
			pcm, rate = w.PCM, w.Rate
		}
	}
	if len(pcm) < 2*rate {
		t.Fatalf("bob decoded %d samples", len(pcm))
	}
	if sh := audio.ToneShare(pcm[rate:], 440, rate); sh < 0.2 {
		t.Errorf("bob hears the session's 440 Hz at %.2f", sh)
	}
}

// newBaresipNode is a node whose SIP domain baresip's accounts name (MD5
// only: baresip 1.0 knows no other) with accounts users (carolPass).
func newBaresipNode(t *testing.T, users ...string) (*Node, context.Context) {
	t.Helper()
	testutil.NeedBinary(t, "baresip")
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "convene.test"
	cfg.SIP.Algorithms = "MD5"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	for _, u := range users {
		if _, err := n.sipUsers.Add(ctx, u, carolPass); err != nil {
			t.Fatal(err)
		}
	}
	return n, ctx
}

// TestPhoneRoutesRefuseStrangers: making a PIN or a call needs the chair
// (or the operator): without credentials 401, as a participant 403, and
// nothing rings.
func TestPhoneRoutesRefuseStrangers(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "strangers")
	_, tok := joinMember(t, n, s.ID, "Pat")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	for _, path := range []string{"/pin", "/calls"} {
		body := map[string]string{"user": "bob"}
		if code := callAs(t, "", "POST", base+path, body, nil); code != 401 {
			t.Errorf("POST %s without credentials: %d, want 401", path, code)
		}
		if code := callAs(t, tok, "POST", base+path, body, nil); code != 403 {
			t.Errorf("POST %s as a participant: %d, want 403", path, code)
		}
	}
	if code := callAs(t, tok, "DELETE", base+"/pin", nil, nil); code != 403 {
		t.Errorf("DELETE /pin as a participant: %d, want 403", code)
	}
	if v := metricValue(t, n, `convene_sip_calls_total{result="outbound"}`); v != 0 {
		t.Errorf("%v calls rang", v)
	}
}
