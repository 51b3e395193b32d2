package node

import (
	"context"
	"fmt"
	"github.com/pion/rtcp"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

func dialRTC(t *testing.T, n apiNode, sid, tok string, opt rtctest.Options) *rtctest.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, n.URL(), sid, tok, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if opt.Audio || opt.Video {
		if err := c.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(context.Background())
		t.Cleanup(mcancel)
		go c.Media(mctx)
	}
	return c
}

// received waits until c has received at least min packets of a track of
// each kind from stream prefix.
func waitMedia(t *testing.T, c *rtctest.Client, member string, kinds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := rtctest.WaitFor(ctx, func() bool {
		for _, k := range kinds {
			ok := false
			for _, r := range c.Received() {
				if r.Kind == k && len(r.Stream) >= len(member) && r.Stream[:len(member)] == member && r.Packets.Load() >= 20 {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		got := map[string]uint64{}
		for id, r := range c.Received() {
			got[id] = r.Packets.Load()
		}
		t.Fatalf("no %v from %s: received %v, tracks %+v, errors %+v", kinds, member, got, c.Tracks(), c.Errors())
	}
}

func TestWebRTCMembersHearAndSeeEachOther(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "webrtc")
	a, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "audio", "video")
	waitMedia(t, cb, a, "audio", "video")
	for _, r := range ca.Received() {
		if r.Stream[:len(a)] == a {
			t.Fatalf("Ada receives her own media: %+v", r)
		}
	}
	// A later joiner gets the existing tracks, and a keyframe soon.
	_, ctok := joinMember(t, n, s.ID, "Cy")
	start := time.Now()
	cc := dialRTC(t, n, s.ID, ctok, rtctest.Options{})
	waitMedia(t, cc, a, "audio", "video")
	waitMedia(t, cc, b, "audio", "video")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool {
		for _, r := range cc.Received() {
			if r.Kind == "video" && r.Keyframes.Load() == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the late joiner saw no keyframe within 5 s")
	}
	t.Logf("late joiner: media and keyframes after %v", time.Since(start))
	// Bob leaves: his tracks go from the others' connections.
	cb.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := rtctest.WaitFor(ctx2, func() bool {
		for _, d := range ca.Tracks() {
			if d.Member == b {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("Bob's tracks still offered to Ada: %+v", ca.Tracks())
	}
}

func joinToken(t *testing.T, n *Node, sid, role string) string {
	t.Helper()
	var jt struct{ Token string }
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+sid+"/tokens", map[string]string{"role": role}, &jt); code != 201 {
		t.Fatalf("token: %d", code)
	}
	return jt.Token
}

// TestWHIPAndWHEP: a WHIP publisher (a pion client standing in for OBS or
// GStreamer) reaches a browser member; a WHEP viewer receives the browser
// member's tracks; deleting the resources hangs them up and their members
// leave.
func TestWHIPAndWHEP(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "whip")
	a, atok := joinMember(t, n, s.ID, "Ada")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, res, err := rtctest.WHIP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "participant"), rtctest.Options{Audio: true, Video: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	mctx, mcancel := context.WithCancel(context.Background())
	defer mcancel()
	go pub.Media(mctx)
	var members struct{ Members []struct{ ID, Name string } }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &members)
	whipMember := ""
	for _, m := range members.Members {
		if m.Name == "WHIP" {
			whipMember = m.ID
		}
	}
	if whipMember == "" {
		t.Fatalf("no WHIP member among %+v", members.Members)
	}
	waitMedia(t, ca, whipMember, "audio", "video")

	view, vres, err := rtctest.WHEP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "listener"), "member="+a)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	waitMedia(t, view, "whep", "audio", "video")

	for _, r := range []rtctest.Resource{res, vres} {
		if code, err := r.Delete(ctx); err != nil || code != 200 {
			t.Fatalf("DELETE %s: %d %v", r.URL, code, err)
		}
		if code, _ := r.Delete(ctx); code != 404 {
			t.Fatalf("second DELETE %s: %d, want 404", r.URL, code)
		}
	}
	if err := rtctest.WaitFor(ctx, func() bool {
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &members)
		return len(members.Members) == 1
	}); err != nil {
		t.Fatalf("WHIP and WHEP members did not leave: %+v", members.Members)
	}
}

// TestWebRTCAndPlainRTPShareASession: ffmpeg's PCMU over plain RTP reaches
// a WebRTC member, and the member's audio reaches a plain RTP receiver.
func TestWebRTCAndPlainRTPShareASession(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "mixed")
	_, atok := joinMember(t, n, s.ID, "Ada")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Decode: true})

	rx := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": rx.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true})
	var got [][]byte
	buf := make([]byte, 2048)
	for len(got) < 20 {
		rx.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := rx.Read(buf)
		if err != nil {
			break
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	if len(got) < 20 {
		t.Fatalf("the plain RTP receiver got %d packets of the WebRTC member's audio", len(got))
	}
	if pt := got[0][1] & 0x7f; pt != 111 {
		t.Fatalf("payload type %d, want the browser's Opus (111)", pt)
	}

	src := freePortPair(t)
	fm, _ := joinMember(t, n, s.ID, "Tone")
	ff := addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio", "direction": "sendonly", "member": fm})
	out := fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", ff.Local.RTPPort, src, src+1)
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "sine=frequency=440:duration=4",
		"-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// A WHEP viewer watches ffmpeg's member.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	view, vres, err := rtctest.WHEP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "listener"), "member="+fm)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	defer vres.Delete(context.Background())
	waitMedia(t, ca, ff.ID, "audio")
	// The PCMU reaches the browser and the viewer transcoded to Opus, the
	// tone intact.
	heard := func(c *rtctest.Client, who, stream string) {
		t.Helper()
		var pcm []int16
		testutil.WaitFor(t, 10*time.Second, who+" to decode a second of ffmpeg's tone", func() bool {
			for _, r := range c.Received() {
				if r.Kind == "audio" && strings.HasPrefix(r.Stream, stream) {
					if !strings.EqualFold(r.Codec, "audio/opus") {
						t.Fatalf("%s receives ffmpeg's PCMU as %q, want audio/opus", who, r.Codec)
					}
					pcm = r.PCM()
				}
			}
			return len(pcm) >= 48000
		})
		if sh := audio.ToneShare(pcm[len(pcm)/2:], 440, 48000); sh < 0.5 {
			t.Errorf("%s hears 440 Hz at %.2f of the energy", who, sh)
		}
	}
	heard(ca, "the browser", ff.ID)
	heard(view, "the WHEP viewer", "") // its one audio track
}

// TestWebRTCFloor: under an enforced audio floor a browser member's audio
// reaches nobody until the chair grants its request.
func TestWebRTCFloor(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "floor")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	if code := call(t, "PUT", base+"/floors/audio", map[string]any{"style": "floor_control"}, nil); code != 200 {
		t.Fatalf("style: %d", code)
	}
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{})
	dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "video") // video has no floor here
	audio := func() uint64 {
		var n uint64
		for _, r := range ca.Received() {
			if r.Kind == "audio" {
				n += r.Packets.Load()
			}
		}
		return n
	}
	time.Sleep(time.Second)
	if got := audio(); got != 0 {
		t.Fatalf("Ada heard %d packets of Bob's audio before he had the floor", got)
	}
	var req struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if code := callAs(t, btok, "POST", base+"/floors/audio/request", map[string]any{}, &req); code != 200 && code != 201 {
		t.Fatalf("request: %d", code)
	}
	if req.Status == "Granted" {
		t.Fatalf("the request was granted without the chair: %+v", req)
	}
	time.Sleep(500 * time.Millisecond)
	if got := audio(); got != 0 {
		t.Fatalf("Ada heard %d packets of Bob's audio while his request waited", got)
	}
	if code := call(t, "POST", base+"/floors/audio/grant", map[string]any{"request_id": req.ID}, nil); code != 200 {
		t.Fatalf("grant: %d", code)
	}
	waitMedia(t, ca, b, "audio")
}

// TestSimulcastFollowsTheBandwidthEstimate: a subscriber whose downlink is
// capped below the high layer is switched to a lower one by its bandwidth
// estimate, and back up when the cap is lifted; a manual choice holds.
func TestSimulcastFollowsTheBandwidthEstimate(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "simulcast")
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	limit := &rtctest.Cap{}
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Receive: limit})
	dialRTC(t, n, s.ID, btok, rtctest.Options{Video: true, Simulcast: true})
	waitMedia(t, ca, b, "video")
	track := b + "-video"
	layer := func(want string, within time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		if err := rtctest.WaitFor(ctx, func() bool { return ca.Layer(track) == want }); err != nil {
			t.Fatalf("layer %q after %v, want %q (tracks %+v)", ca.Layer(track), within, want, ca.Tracks())
		}
	}
	limit.Set(250_000)
	layer("low", 20*time.Second)
	limit.Set(0)
	layer("high", 60*time.Second)
	if err := ca.SetLayer(track, "mid"); err != nil {
		t.Fatal(err)
	}
	layer("mid", 10*time.Second)
}

// TestNACKsAreAnsweredFromTheHistory: a subscriber that loses video
// packets asks for them again, and the node resends them from the packets
// it keeps per down track (not from the publisher).
func TestNACKsAreAnsweredFromTheHistory(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "nack")
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	loss := &rtctest.Loss{Every: 20}
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Receive: loss})
	dialRTC(t, n, s.ID, btok, rtctest.Options{Video: true})
	waitMedia(t, ca, b, "video")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool { return loss.Recovered() >= 10 }); err != nil {
		t.Fatalf("dropped %d video packets, %d came again (resent %v, missing %v)", loss.Dropped(), loss.Recovered(), metricValue(t, n, `convene_webrtc_nack_packets_total{what="resent"}`), metricValue(t, n, `convene_webrtc_nack_packets_total{what="missing"}`))
	}
	if d, r := loss.Dropped(), loss.Recovered(); r < d/2 {
		t.Fatalf("dropped %d video packets, only %d came again", d, r)
	}
	if v := metricValue(t, n, `convene_webrtc_nack_packets_total{what="resent"}`); v < 10 {
		t.Fatalf("resent packets metric %v, want at least 10", v)
	}
}

// TestSubscribersGetSenderReports: each track a browser receives comes
// with the node's sender reports, once a second: the track's SSRC, the
// packets sent so far, and an RTP time that runs with the wall clock at the
// track's rate (what a browser maps timestamps to the wall clock with).
// Both audio and video go the direct way (the node's own SRTP, past
// pion's SRTP, mux and ICE writers; the video after pion's interceptors),
// and the client decrypts every packet: the packets it took keep up with
// the count the reports give.
func TestSubscribersGetSenderReports(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WebRTC.UDPPort = freePort(t, "udp") // the default's single port: the direct path needs it
	n := startNode(t, cfg)
	s := createSession(t, n, "reports")
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{})
	dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "audio", "video")
	for _, r := range ca.Received() {
		first := waitReport(t, r, 0)
		second := waitReport(t, r, r.Reports.Load())
		if first.PacketCount == 0 || second.PacketCount <= first.PacketCount || second.OctetCount <= first.OctetCount {
			t.Errorf("%s: counts %d/%d then %d/%d", r.Kind, first.PacketCount, first.OctetCount, second.PacketCount, second.OctetCount)
		}
		clock := 48000.0
		if r.Kind == "video" {
			clock = 90000
		}
		wall := ntpSeconds(second.NTPTime) - ntpSeconds(first.NTPTime)
		// What had arrived when the report did is what the report counts,
		// give or take what was in flight: a loaded machine's client may
		// be a few seconds behind, never a whole track's worth.
		rate := float64(second.PacketCount-first.PacketCount) / max(wall, 0.1)
		if d := float64(second.PacketCount) - float64(second.Received); d < -rate-5 || d > 3*rate+20 {
			t.Errorf("%s: the report counts %d packets sent, %d had arrived (%.0f a second)", r.Kind, second.PacketCount, second.Received, rate)
		}
		rtpSecs := float64(second.RTPTime-first.RTPTime) / clock
		if wall < 0.5 || math.Abs(rtpSecs-wall) > 0.1 { // a wrong clock rate is off by a third or more
			t.Errorf("%s: between two reports %.3f s of wall clock and %.3f s of RTP time", r.Kind, wall, rtpSecs)
		}
		if off := time.Duration((ntpSeconds(second.NTPTime) - float64(second.At.UnixNano())/1e9 - 2208988800) * 1e9); off > 100*time.Millisecond || off < -5*time.Second {
			t.Errorf("%s: a report's NTP time is %v from when it arrived", r.Kind, off)
		}
	}
	for _, kind := range []string{"audio", "video"} {
		if v := metricValue(t, n, `convene_webrtc_direct_packets_total{kind="`+kind+`"}`); v < 50 {
			t.Errorf("%s packets sent the direct way: %v", kind, v)
		}
	}
}

// TestPublishedMediaComesTheDirectWay: with the single UDP port, a
// publisher's audio and video are read past pion's receive chain (the
// node's own SRTP; direct_in.go). A subscriber gets every packet of both,
// the receiver reports the publisher gets keep counting what the node
// received (pion alone would report only the packets it saw before the
// track went direct), and the publisher's video gets transport-wide
// feedback on the packets that went direct (feedback.go).
func TestPublishedMediaComesTheDirectWay(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WebRTC.UDPPort = freePort(t, "udp")
	n := startNode(t, cfg)
	s := createSession(t, n, "direct-in")
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{})
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "audio", "video")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var first rtcp.ReceptionReport
	const din = `convene_webrtc_direct_in_packets_total{kind="`
	if err := rtctest.WaitFor(ctx, func() bool {
		r, ok := cb.ReceptionReport("audio")
		first = r
		return ok && metricValue(t, n, din+`audio"}`) >= 50 && metricValue(t, n, din+`video"}`) >= 50
	}); err != nil {
		r, _ := cb.ReceptionReport("audio")
		t.Fatalf("direct packets %v audio, %v video, report %+v", metricValue(t, n, din+`audio"}`), metricValue(t, n, din+`video"}`), r)
	}
	fb0 := cb.TransportFeedback()
	type count struct{ got, high int64 }
	counts := func() map[string]count {
		m := map[string]count{}
		for _, r := range ca.Received() {
			m[r.Kind] = count{int64(r.Packets.Load()), r.High.Load()}
		}
		return m
	}
	before := counts()
	time.Sleep(2500 * time.Millisecond)
	after := counts()
	second, _ := cb.ReceptionReport("audio")
	// Feedback every 100 ms on the video that went direct.
	if fb := cb.TransportFeedback() - fb0; fb < 10 {
		t.Errorf("%d transport-wide feedback packets in 2.5 s", fb)
	}
	// 50 packets a second: two seconds on, the report has moved by about 100.
	if d := second.LastSequenceNumber - first.LastSequenceNumber; d < 60 || d > 200 {
		t.Errorf("the audio's reports: highest sequence %d then %d", first.LastSequenceNumber, second.LastSequenceNumber)
	}
	if second.TotalLost != 0 || second.FractionLost != 0 {
		t.Errorf("reported lost on loopback: %+v", second)
	}
	for kind, a := range after {
		b := before[kind]
		if got, sent := a.got-b.got, a.high-b.high; sent < 50 || got < sent-2 {
			t.Errorf("%s: received %d of %d packets", kind, got, sent)
		}
	}
	if v := metricValue(t, n, "convene_webrtc_direct_in_refused_total"); v != 0 {
		t.Errorf("refused %v", v)
	}
}

// waitReport waits for r's sender report after the after-th.
func waitReport(t *testing.T, r *rtctest.Recv, after uint64) *rtctest.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool { return r.Reports.Load() > after }); err != nil {
		t.Fatalf("%s: no sender report after the %d-th", r.Kind, after)
	}
	return r.LastReport()
}

func ntpSeconds(v uint64) float64 { return float64(v>>32) + float64(v&0xffffffff)/(1<<32) }

// TestWebRTCBadInput: garbage frames, invalid SDP and a flood of offers
// each get a clear error on that socket while the other members' media
// keeps flowing; sockets and WHIP without a valid member token, with a
// revoked join token or with an expired one are refused before anything is
// allocated.
func TestWebRTCBadInput(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "bad")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	_, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{})
	dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true})
	waitMedia(t, ca, b, "audio", "video")

	_, mtok := joinMember(t, n, s.ID, "Mallory")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := rtctest.Dial(ctx, n.URL(), s.ID, mtok, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	expect := func(frame, code string) {
		t.Helper()
		before := len(cm.Errors())
		if err := cm.Send([]byte(frame)); err != nil {
			t.Fatal(err)
		}
		if err := rtctest.WaitFor(ctx, func() bool { return len(cm.Errors()) > before }); err != nil {
			t.Fatalf("no error frame for %.60s", frame)
		}
		if got := cm.Errors()[before]; got.Code != code || got.Message == "" {
			t.Fatalf("%.60s: error %+v, want code %s", frame, got, code)
		}
	}
	expect(`garbage`, "bad_frame")
	expect(`{"type":"explode"}`, "bad_frame")
	expect(`{"type":"offer","pc":"pub","sdp":"v=0\r\no=- broken"}`, "invalid_sdp")
	expect(`{"type":"answer","pc":"sub","sdp":"v=0\r\n"}`, "invalid_sdp")
	expect(`{"type":"layer","track":"nope","layer":"low"}`, "unknown_track")
	for i := 0; i < 11; i++ {
		_ = cm.Send([]byte(`{"type":"offer","pc":"pub","sdp":"v=0\r\nx"}`))
	}
	if err := rtctest.WaitFor(ctx, func() bool {
		for _, e := range cm.Errors() {
			if e.Code == "rate_limited" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("a flood of offers was not limited: %+v", cm.Errors())
	}

	// The others never noticed.
	r := map[string]uint64{}
	for id, x := range ca.Received() {
		r[id] = x.Packets.Load()
	}
	time.Sleep(500 * time.Millisecond)
	for id, x := range ca.Received() {
		if x.Packets.Load() <= r[id] {
			t.Fatalf("Ada's track %s stalled while Mallory misbehaved", id)
		}
	}

	// Credentials.
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/rtc"
	dial := func(tok string) int {
		hdr := http.Header{}
		if tok != "" {
			hdr.Set("Authorization", "Bearer "+tok)
		}
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
		if err == nil {
			c.CloseNow()
			return 101
		}
		if resp == nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if code := dial(""); code != 401 {
		t.Errorf("socket without a token: %d, want 401", code)
	}
	if code := dial("not-a-token"); code != 401 {
		t.Errorf("socket with a bad key: %d, want 401", code)
	}
	join := joinToken(t, n, s.ID, "participant")
	if code := dial(join); code != 401 {
		t.Errorf("socket with a join token (not a member's): %d, want 401", code)
	}
	var jt struct{ Token, ID string }
	call(t, "POST", base+"/tokens", map[string]any{"role": "participant"}, &jt)
	call(t, "DELETE", base+"/tokens/"+jt.ID, nil, nil)
	if _, _, err := rtctest.WHIP(ctx, n.URL(), s.ID, jt.Token, rtctest.Options{Audio: true}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("WHIP with a revoked join token: %v, want 403", err)
	}
	var exp struct{ Token string }
	call(t, "POST", base+"/tokens", map[string]any{"role": "participant", "expires_at": time.Now().Add(time.Second).UTC().Format(time.RFC3339)}, &exp)
	time.Sleep(2100 * time.Millisecond)
	if _, _, err := rtctest.WHIP(ctx, n.URL(), s.ID, exp.Token, rtctest.Options{Audio: true}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("WHIP with an expired join token: %v, want 401", err)
	}
	// WHIP bodies that are not offers.
	for _, c := range []struct {
		ct, body string
		want     int
	}{{"application/json", "{}", 415}, {"application/sdp", "hello", 400}, {"application/sdp", "v=0\r\nnonsense", 400}} {
		req, _ := http.NewRequest("POST", base+"/whip", strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ct)
		req.Header.Set("Authorization", "Bearer "+joinToken(t, n, s.ID, "participant"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("WHIP %s %q: %d, want %d", c.ct, c.body, resp.StatusCode, c.want)
		}
	}
	if got := metricValue(t, n, `convene_webrtc_signalling_errors_total{code="bad_frame"}`); got < 2 {
		t.Errorf("bad_frame errors counted %v, want 2 or more", got)
	}
}

func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	c := udpConn(t)
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestWebRTCSinglePortAndICETCP: in single-port mode every connection
// uses the one UDP port; a client that can only use TCP gets its media
// over ICE-TCP.
func TestWebRTCSinglePortAndICETCP(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WebRTC.UDPPort = freePort(t, "udp")
	cfg.WebRTC.TCPPort = freePort(t, "tcp")
	n := startNode(t, cfg)
	s := createSession(t, n, "ports")
	a, atok := joinMember(t, n, s.ID, "Ada")
	b, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Audio: true, Video: true})
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{Audio: true, Video: true, TCP: true})
	waitMedia(t, ca, b, "audio", "video")
	waitMedia(t, cb, a, "audio", "video")
	for _, pc := range []*webrtc.PeerConnection{ca.Pub, ca.Sub} {
		pair, err := pc.SCTP().Transport().ICETransport().GetSelectedCandidatePair()
		if err != nil || pair == nil {
			t.Fatalf("no selected pair: %v", err)
		}
		if int(pair.Remote.Port) != cfg.WebRTC.UDPPort || pair.Remote.Protocol != webrtc.ICEProtocolUDP {
			t.Errorf("UDP client's pair %s, want the single port %d", pair.Remote, cfg.WebRTC.UDPPort)
		}
	}
	pair, err := cb.Pub.SCTP().Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil || pair == nil || pair.Remote.Protocol != webrtc.ICEProtocolTCP || int(pair.Remote.Port) != cfg.WebRTC.TCPPort {
		t.Errorf("TCP client's pair %v (%v), want TCP to port %d", pair, err, cfg.WebRTC.TCPPort)
	}
}

// TestSpeakersMutesAndICEConfig: a member whose audio carries a loud RFC
// 6464 level becomes the active speaker on the event stream, a quiet one
// does not; a mute frame becomes a media.muted event; the welcome frame
// hands out the configured ICE servers, and answers name the public
// address instead of the host's.
func TestSpeakersMutesAndICEConfig(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WebRTC.PublicIPs = "127.0.0.9"
	cfg.WebRTC.ICEServers = "stun:stun.example.org:3478 turn:turn.example.org:3478"
	cfg.WebRTC.TURNUsername, cfg.WebRTC.TURNCredential = "u", "secret"
	n := startNode(t, cfg)
	s := createSession(t, n, "speakers")
	_, ltok := joinMember(t, n, s.ID, "Loud")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With a public address in its candidates the node is not reachable
	// here, so these clients only signal; the address is what is checked.
	c, err := rtctest.Dial(ctx, n.URL(), s.ID, ltok, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	welcome := c.Welcome()
	if len(welcome.ICEServers) != 2 || welcome.ICEServers[1].Username != "u" || welcome.ICEServers[1].Credential != "secret" || welcome.ICEServers[0].Username != "" {
		t.Errorf("welcome ICE servers %+v", welcome.ICEServers)
	}
	pub, _, err := rtctest.WHIP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "participant"), rtctest.Options{Audio: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	answer := pub.Pub.RemoteDescription().SDP
	if !strings.Contains(answer, " 127.0.0.9 ") || strings.Contains(answer, " 127.0.0.1 ") {
		t.Errorf("the answer's candidates do not name the public address only:\n%s", answer)
	}
	c.Close()
	pub.Close()

	// Speakers and mutes, on a node without a public address.
	n2 := startNode(t, testConfig(t, t.TempDir()))
	s2 := createSession(t, n2, "speakers")
	loud, ltok := joinMember(t, n2, s2.ID, "Loud")
	quiet, qtok := joinMember(t, n2, s2.ID, "Quiet")
	ws := dialWS(t, n2, s2.ID, ltok)
	cl := dialRTC(t, n2, s2.ID, ltok, rtctest.Options{Audio: true, Level: 20})
	dialRTC(t, n2, s2.ID, qtok, rtctest.Options{Audio: true, Level: 90})
	f := ws.next(t, func(f map[string]any) bool { return f["type"] == "speaker.active" })
	got := f["data"].(map[string]any)["members"].([]any)
	if len(got) != 1 || got[0] != loud {
		t.Fatalf("active speakers %v, want only %s (not the quiet %s)", got, loud, quiet)
	}
	if err := cl.Send([]byte(`{"type":"mute","kind":"audio","muted":true}`)); err != nil {
		t.Fatal(err)
	}
	f = ws.next(t, func(f map[string]any) bool { return f["type"] == "media.muted" })
	if d := f["data"].(map[string]any); d["member"] != loud || d["muted"] != true || d["kind"] != "audio" {
		t.Fatalf("media.muted %v", d)
	}
}

// TestWHEPViewerOfAPhoneHearsOpus: a WHEP viewer that arrives when the
// session's only audio is G.711 (ffmpeg's PCMU, as a phone's) gets an Opus
// track, the tone transcoded, rather than a PCMU track that a browser's
// Opus speaker could not later be forwarded into.
func TestWHEPViewerOfAPhoneHearsOpus(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "phone only")
	src := freePortPair(t)
	fm, _ := joinMember(t, n, s.ID, "Tone")
	ff := addLink(t, n, s.ID, map[string]any{"remote": fmt.Sprintf("127.0.0.1:%d", src), "kind": "audio", "direction": "sendonly", "member": fm})
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "sine=frequency=440:duration=6",
		"-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", fmt.Sprintf("rtp://127.0.0.1:%d?localrtpport=%d&localrtcpport=%d", ff.Local.RTPPort, src, src+1))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	testutil.WaitFor(t, 10*time.Second, "ffmpeg's PCMU in the session", func() bool {
		var sess sessionJSON
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		return len(sess.Tracks) == 1 && sess.Tracks[0].Packets > 10
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	view, res, err := rtctest.WHEP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "listener"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	defer res.Delete(context.Background())
	var pcm []int16
	testutil.WaitFor(t, 10*time.Second, "the viewer to decode a second of audio", func() bool {
		for _, r := range view.Received() {
			if r.Kind == "audio" {
				if !strings.EqualFold(r.Codec, "audio/opus") {
					t.Fatalf("the WHEP viewer's audio is %q, want audio/opus", r.Codec)
				}
				pcm = r.PCM()
			}
		}
		return len(pcm) >= 48000
	})
	if sh := audio.ToneShare(pcm[len(pcm)/2:], 440, 48000); sh < 0.5 {
		t.Errorf("the viewer hears 440 Hz at %.2f of the energy", sh)
	}
}

// TestTheFirstTracksFrameFollowsTheWelcome: a member alone in a session is
// told at once that it receives nothing (an empty tracks frame: the web
// app then sends its camera without waiting for others' video), and a
// later member is told the first one's tracks.
func TestTheFirstTracksFrameFollowsTheWelcome(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "told")
	a, atok := joinMember(t, n, s.ID, "Ada")
	_, btok := joinMember(t, n, s.ID, "Bob")
	ca := dialRTC(t, n, s.ID, atok, rtctest.Options{Video: true, Simulcast: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool { return ca.TracksFrames() > 0 }); err != nil {
		t.Fatalf("the lone member had no tracks frame")
	}
	if ts := ca.Tracks(); len(ts) != 0 {
		t.Fatalf("the lone member's first tracks frame lists %+v, want nothing", ts)
	}
	cb := dialRTC(t, n, s.ID, btok, rtctest.Options{})
	if err := rtctest.WaitFor(ctx, func() bool {
		for _, x := range cb.Tracks() {
			if x.Member == a && x.Kind == "video" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the second member's tracks: %+v, want Ada's video", cb.Tracks())
	}
	waitMedia(t, cb, a, "video")
	if f := cb.TracksFrames(); f < 1 {
		t.Fatalf("%d tracks frames", f)
	}
}
