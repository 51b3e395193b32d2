package node

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media/ivfwriter"

	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// TestVideoPhonePublishesItsCamera: a SIPp phone dials in offering audio
// and video (H.263, then VP8) to a node that can make no composite (no
// ffmpeg of its own): the node's 200 answers both m-lines, the video in
// VP8 at the node's port, sendrecv (the phone would get the speaker's
// camera; TestVideoPhoneFollowsTheSpeaker); the phone's camera
// (ffmpeg's VP8 test card, 320×240, sent from the port its SDP named)
// becomes a video track of its member that a WebRTC member (pion, in
// the session before the phone) receives: ffprobe decodes what it received, 320 wide. Hanging up
// removes the member.
func TestVideoPhonePublishesItsCamera(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	testutil.NeedBinary(t, "sipp")
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "convene.test"
	cfg.Streaming.FFmpeg = "/nonexistent/ffmpeg" // the node makes no composite
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := n.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, n, "video phone")

	// A WebRTC member receives it and writes it down; ffprobe decodes it.
	path := filepath.Join(t.TempDir(), "phone.ivf")
	w, err := ivfwriter.New(path, ivfwriter.WithCodec(webrtc.MimeTypeVP8))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	frames, codec := 0, ""
	_, btok := joinAs(t, n, s.ID, "Browser", "participant")
	dialRTC(t, n, s.ID, btok, rtctest.Options{VideoCodecs: []string{webrtc.MimeTypeVP8}, OnVideo: func(c string, p *rtp.Packet) {
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
	vport := freePortPair(t)
	phone := startSIPpAs(t, ctx, n, "dialin_video.xml", s.ID, "carol", carolPass, 30*time.Second,
		"-set", "vport", strconv.Itoa(vport), "-d", "25000", "-trace_msg")
	type link struct {
		ID, Kind, Member, Remote, Direction string
		Local                               struct {
			Addr    string
			RTPPort int `json:"rtp_port"`
		}
	}
	var video link
	testutil.WaitFor(t, 15*time.Second, "the phone's video link", func() bool {
		var sess struct{ Links []link }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, l := range sess.Links {
			if l.Kind == "video" && l.Remote == "127.0.0.1:"+strconv.Itoa(vport) {
				video = l
			}
		}
		return video.ID != ""
	})
	if video.Member == "" || video.Direction != "sendrecv" {
		t.Errorf("the phone's video link %+v, want its member's, sendrecv", video)
	}
	// The phone's camera: VP8 from the port its SDP named.
	target := video.Local.Addr + ":" + strconv.Itoa(video.Local.RTPPort)
	cam := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-re",
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=10",
		"-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-g", "15", "-payload_type", "100",
		"-f", "rtp", "rtp://"+target+"?localrtpport="+strconv.Itoa(vport)+"&localrtcpport="+strconv.Itoa(vport+1))
	startChild(t, cam)

	testutil.WaitFor(t, 20*time.Second, "the browser's frames of the phone's camera", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return frames >= 30
	})
	mu.Lock()
	w.Close()
	w = nil
	got := codec
	mu.Unlock()
	if !strings.EqualFold(got, webrtc.MimeTypeVP8) {
		t.Errorf("the browser's track of the phone's camera is %s", got)
	}
	c, width, decoded := probeVideo(t, path)
	t.Logf("the browser's stream of the phone's camera: %s, %d wide, %d frames", c, width, decoded)
	if c != "vp8" || width != 320 || decoded < 5 {
		t.Fatalf("the browser decoded %s %d wide, %d frames of the phone's camera", c, width, decoded)
	}

	phone.wait(t)
	msgs := phone.messages(t)
	i := strings.Index(msgs, "SIP/2.0 200 OK")
	if i < 0 {
		t.Fatalf("no 200 in the phone's trace")
	}
	ok := msgs[i:]
	if j := strings.Index(ok, "m=video "+strconv.Itoa(video.Local.RTPPort)+" RTP/AVP 100"); j < 0 || strings.Index(ok, "m=audio ") > j ||
		!strings.Contains(ok, "a=rtpmap:100 VP8/90000") || !strings.Contains(ok[j:], "a=sendrecv") {
		t.Errorf("the 200's SDP does not answer the video in VP8, sendrecv, after the audio:\n%s", ok)
	}
	testutil.WaitFor(t, 5*time.Second, "the phone's member to leave", func() bool {
		var ms struct{ Members []struct{ ID string } }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &ms)
		for _, m := range ms.Members {
			if m.ID == video.Member {
				return false
			}
		}
		return true
	})
}

// TestVideoPhoneReceivesTheComposite: four members' solid-colour cameras;
// a SIPp phone dials in offering VP8 (or H.264) video as payload type
// 100: the node starts a 2×2 composite in that codec for the session's
// phones and the phone's link sends it, in the phone's payload type, once
// the phone's own camera (ffmpeg's test card through a socket at the port
// its SDP named) has given consent; an ffmpeg decoder behind that socket
// finds each colour in its quadrant. The phone's hang-up stops the
// composite.
func TestVideoPhoneReceivesTheComposite(t *testing.T) {
	for _, c := range []struct{ name, scenario, rtpmap, encoder string }{
		{"VP8", "dialin_video.xml", "VP8/90000", "libvpx"},
		{"H264", "dialin_video_h264.xml", "H264/90000\r\na=fmtp:100 packetization-mode=1", "libx264"},
	} {
		t.Run(c.name, func(t *testing.T) { phoneReceivesTheComposite(t, c.scenario, c.rtpmap, c.encoder) })
	}
}

func phoneReceivesTheComposite(t *testing.T, scenario, rtpmap, encoder string) {
	bin := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "video phone composite")
	sendColours(t, n, s.ID)

	// The phone's media side: a socket at the port its SDP names.
	vport := freePortPair(t)
	sock, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: vport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	phone := startSIPpAs(t, ctx, n, scenario, s.ID, "carol", carolPass, 40*time.Second,
		"-set", "vport", strconv.Itoa(vport), "-d", "25000", "-trace_msg")
	var node *net.UDPAddr
	testutil.WaitFor(t, 15*time.Second, "the phone's video link", func() bool {
		var sess struct {
			Links []struct {
				Kind, Remote string
				Local        struct {
					Addr    string
					RTPPort int `json:"rtp_port"`
				}
			}
		}
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, l := range sess.Links {
			if l.Kind == "video" && l.Remote == "127.0.0.1:"+strconv.Itoa(vport) {
				node = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
			}
		}
		return node != nil
	})
	var running struct{ Composites []compositeJSON }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &running)
	if len(running.Composites) != 1 {
		t.Fatalf("composites %+v, want the one started for the phone", running.Composites)
	}
	var codecs struct{ Composites []struct{ Codec string } }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &codecs)
	if len(codecs.Composites) != 1 || (encoder == "libx264") != (codecs.Composites[0].Codec == "H264") {
		t.Errorf("the phones' composite %+v, want it in the phone's codec (%s)", codecs.Composites, rtpmap)
	}

	// The decoder of what the phone receives (payload type 100, VP8).
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	sdpPath := filepath.Join(t.TempDir(), "phone.sdp")
	if err := os.WriteFile(sdpPath, []byte("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=phone\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"+
		"m=video "+strconv.Itoa(ports[0])+" RTP/AVP 100\r\na=rtpmap:100 "+rtpmap+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const w, h = 640, 360
	dec := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-protocol_whitelist", "file,udp,rtp",
		"-reorder_queue_size", "64", "-i", sdpPath, "-fps_mode", "passthrough", "-vf", "scale=640:360", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	out, err := dec.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startChild(t, dec)
	frames := make(chan []byte, 1024)
	go func() {
		defer close(frames)
		for {
			f := make([]byte, w*h*3)
			if _, err := io.ReadFull(out, f); err != nil {
				return
			}
			select {
			case frames <- f:
			default:
			}
		}
	}()
	var wrongPT, received atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ports[0]}
		for {
			k, from, err := sock.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if from.Port != node.Port || k < 12 {
				continue
			}
			received.Add(1)
			if buf[1]&0x7f != 100 {
				wrongPT.Add(1)
			}
			sock.WriteToUDP(buf[:k], to)
		}
	}()
	phoneCamera(t, bin, encoder, sock, node, 30)

	var f []byte
	deadline := time.After(30 * time.Second)
	for f == nil {
		select {
		case g, ok := <-frames:
			if !ok {
				t.Fatal("the phone's decoder ended")
			}
			// The composite shows all four once its child has them: wait
			// for a frame whose quadrants are the colours.
			if ok := quadrantsAre(g, w, h); ok {
				f = g
			}
		case <-deadline:
			t.Fatalf("the phone decoded no frame of the four colours in 30 s (%d packets received)", received.Load())
		}
	}
	checkQuadrants(t, f, w, h, []string{"red", "green", "blue", "white"})
	if wrongPT.Load() != 0 {
		t.Errorf("%d of %d packets to the phone were not its payload type 100", wrongPT.Load(), received.Load())
	}
	t.Logf("the phone decoded the composite's four colours (%d packets received)", received.Load())

	phone.wait(t)
	if !strings.Contains(phone.messages(t), "a=sendrecv\r\n") {
		t.Errorf("the 200 does not answer the phone's video sendrecv")
	}
	testutil.WaitFor(t, 10*time.Second, "the phone's composite to stop", func() bool {
		var l struct{ Composites []compositeJSON }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &l)
		return len(l.Composites) == 0
	})
}

// quadrantsAre reports whether each quadrant's middle of a w×h rgb24
// frame is within 60 per channel of red, green, blue and white.
func quadrantsAre(f []byte, w, h int) bool {
	for i, c := range testColours {
		cx, cy := (i%2)*w/2+w/4, (i/2)*h/2+h/4-h/16
		got := mean(f, w, cx-w/8, cy-h/10, cx+w/8, cy+h/10)
		for k := range 3 {
			if d := got[k] - c.rgb[k]; d > 60 || d < -60 {
				return false
			}
		}
	}
	return true
}

// phoneCamera sends a phone's camera, ffmpeg's test card in encoder
// (payload type 100) for secs, to the node's port from the phone's
// socket: the node sends a phone nothing before it heard from it.
func phoneCamera(t *testing.T, bin, encoder string, sock *net.UDPConn, node *net.UDPAddr, secs int) {
	t.Helper()
	phoneCameraOf(t, bin, encoder, "testsrc=size=320x240:rate=15:duration="+strconv.Itoa(secs), sock, node)
}

// phoneCameraOf is phoneCamera of the lavfi source src.
func phoneCameraOf(t *testing.T, bin, encoder, src string, sock *net.UDPConn, node *net.UDPAddr) {
	t.Helper()
	camIn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { camIn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			k, err := camIn.Read(buf)
			if err != nil {
				return
			}
			if k >= 2 && buf[1]&0x7f >= 72 && buf[1]&0x7f <= 76 {
				continue // RTCP (ffmpeg sends it to the RTP port + 1; dropped)
			}
			sock.WriteToUDP(buf[:k], node)
		}
	}()
	startChild(t, exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-re",
		"-f", "lavfi", "-i", src,
		"-c:v", encoder, "-deadline", "realtime", "-preset", "ultrafast", "-b:v", "200k", "-g", "15", "-payload_type", "100",
		"-f", "rtp", "rtp://"+camIn.LocalAddr().String()))
}

// TestVideoPhonesShareOneComposite: two SIPp video phones in one session
// share the composite the node started for the first; it runs while one
// of them is on the line and stops when the last hangs up.
func TestVideoPhonesShareOneComposite(t *testing.T) {
	testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "two video phones")
	composites := func() []compositeJSON {
		var l struct{ Composites []compositeJSON }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/composites", nil, &l)
		return l.Composites
	}
	videoLinks := func() int {
		var sess struct {
			Links []struct{ Kind, Direction string }
		}
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		k := 0
		for _, l := range sess.Links {
			if l.Kind == "video" && l.Direction == "sendrecv" {
				k++
			}
		}
		return k
	}
	first := startSIPpAs(t, ctx, n, "dialin_video.xml", s.ID, "carol", carolPass, 30*time.Second,
		"-set", "vport", strconv.Itoa(freePortPair(t)), "-d", "6000")
	testutil.WaitFor(t, 15*time.Second, "the first phone's video link", func() bool { return videoLinks() == 1 })
	second := startSIPpAs(t, ctx, n, "dialin_video.xml", s.ID, "carol", carolPass, 30*time.Second,
		"-set", "vport", strconv.Itoa(freePortPair(t)), "-d", "16000")
	testutil.WaitFor(t, 15*time.Second, "the second phone's video link", func() bool { return videoLinks() == 2 })
	if c := composites(); len(c) != 1 {
		t.Fatalf("composites with two phones: %+v, want one", c)
	}
	first.wait(t)
	testutil.WaitFor(t, 10*time.Second, "the first phone to leave", func() bool { return videoLinks() == 1 })
	if c := composites(); len(c) != 1 {
		t.Errorf("composites after the first phone left: %d, want the one the second receives", len(c))
	}
	second.wait(t)
	testutil.WaitFor(t, 10*time.Second, "the composite to stop with the last phone", func() bool { return len(composites()) == 0 })
}

// TestVideoPhoneCompositeReplaced: a SIPp video phone receives the
// composite a chair started (showing the phone's camera); when the chair
// stops it, the node starts one for the phone within seconds and the
// phone's link goes on sending it video; hanging up stops that one.
func TestVideoPhoneCompositeReplaced(t *testing.T) {
	bin := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "composite replaced")
	url := n.URL() + "/api/v1/sessions/" + s.ID + "/composites"
	composites := func() []compositeJSON {
		var l struct{ Composites []compositeJSON }
		call(t, "GET", url, nil, &l)
		return l.Composites
	}
	var chairs compositeJSON
	if code := call(t, "POST", url, map[string]any{"layout": "grid2", "width": 320, "height": 180, "fps": 10}, &chairs); code != 201 {
		t.Fatalf("the chair's composite: %d", code)
	}
	// The phone's media side: a socket at the port its SDP names, which
	// sends the node an RTP packet now and then (the node sends a phone
	// nothing before it heard from it) and counts what comes back.
	vport := freePortPair(t)
	sock, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: vport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	phone := startSIPpAs(t, ctx, n, "dialin_video.xml", s.ID, "carol", carolPass, 40*time.Second,
		"-set", "vport", strconv.Itoa(vport), "-d", "25000")
	var node *net.UDPAddr
	testutil.WaitFor(t, 15*time.Second, "the phone's video link", func() bool {
		var sess struct {
			Links []struct {
				Kind, Remote string
				Local        struct {
					Addr    string
					RTPPort int `json:"rtp_port"`
				}
			}
		}
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, l := range sess.Links {
			if l.Kind == "video" && l.Remote == "127.0.0.1:"+strconv.Itoa(vport) {
				node = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
			}
		}
		return node != nil
	})
	var received atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := sock.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if from.Port == node.Port && k >= 12 {
				received.Add(1)
			}
		}
	}()
	phoneCamera(t, bin, "libvpx", sock, node, 40)
	testutil.WaitFor(t, 40*time.Second, "the chair's composite reaching the phone", func() bool { return received.Load() > 10 })
	if c := composites(); len(c) != 1 || c[0].ID != chairs.ID {
		t.Fatalf("composites with the phone on the chair's: %+v, want the chair's alone", c)
	}
	if code := call(t, "DELETE", url+"/"+chairs.ID, nil, nil); code != 204 {
		t.Fatalf("the chair stops its composite: %d", code)
	}
	stopped := time.Now()
	testutil.WaitFor(t, 10*time.Second, "a composite started for the phone", func() bool {
		c := composites()
		return len(c) == 1 && c[0].ID != chairs.ID
	})
	before := received.Load()
	testutil.WaitFor(t, 30*time.Second, "the new composite reaching the phone", func() bool { return received.Load() > before+10 })
	t.Logf("the phone's new composite reaches it %v after the chair's stopped", time.Since(stopped).Round(time.Millisecond))
	phone.wait(t)
	testutil.WaitFor(t, 10*time.Second, "the phone's composite to stop when it hangs up", func() bool { return len(composites()) == 0 })
}

// TestVideoPhoneFollowsTheSpeaker: on a node that can make no composite
// (no ffmpeg of its own), a SIPp video phone receives one camera, in its
// payload type: the first camera (by track) while nobody speaks, then the
// camera of the member who speaks (a 440 Hz tone through its audio link,
// which the phone's mix hears): an ffmpeg decoder behind the phone's port
// sees the first member's colour, then the speaker's, and every packet
// to the phone has one SSRC and sequence numbers that run on: ffmpeg's
// RTP demuxer drops a new source whose numbers are behind the old one's.
func TestVideoPhoneFollowsTheSpeaker(t *testing.T) {
	bin := testutil.NeedBinary(t, "ffmpeg")
	testutil.NeedBinary(t, "sipp")
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "convene.test"
	cfg.Streaming.FFmpeg = "/nonexistent/ffmpeg" // the node makes no composite
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := n.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, n, "video phone speaker")
	// Two members' cameras, red and green (VP8, 320×240).
	colours := []string{"red", "green"}
	members := map[string]string{}
	var links []linkJSON
	args := []string{"-hide_banner", "-loglevel", "error", "-nostdin"}
	for _, c := range colours {
		args = append(args, "-re", "-f", "lavfi", "-i", "color=c="+c+":s=320x240:r=15:d=60")
	}
	for i, c := range colours {
		id, _ := joinAs(t, n, s.ID, c, "participant")
		members[c] = id
		tee := newTee(t)
		l := addLink(t, n, s.ID, map[string]any{"remote": tee.remote(), "kind": "video", "direction": "sendonly", "member": id})
		tee.run(l)
		links = append(links, l)
		args = append(args, "-map", strconv.Itoa(i)+":v", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "150k",
			"-g", "15", "-f", "rtp", "rtp://"+tee.target())
	}
	startChild(t, exec.Command(bin, args...))
	// The first camera by track ID, and the other, who will speak.
	first, speaker := colours[0], colours[1]
	if links[1].ID < links[0].ID {
		first, speaker = colours[1], colours[0]
	}

	vport := freePortPair(t)
	sock, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: vport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	phone := startSIPpAs(t, ctx, n, "dialin_video.xml", s.ID, "carol", carolPass, 40*time.Second,
		"-set", "vport", strconv.Itoa(vport), "-d", "30000", "-trace_msg")
	t.Cleanup(func() {
		if t.Failed() { // what the phone saw, for a call that did not come up
			t.Logf("SIPp:\n%s", phone.out.String())
			if fs, _ := filepath.Glob(filepath.Join(phone.cmd.Dir, "*_messages.log")); len(fs) == 1 {
				b, _ := os.ReadFile(fs[0])
				t.Logf("SIPp's messages:\n%s", b)
			}
		}
	})
	var node *net.UDPAddr
	testutil.WaitFor(t, 15*time.Second, "the phone's video link", func() bool {
		var sess struct {
			Links []struct {
				Kind, Remote, Direction string
				Local                   struct {
					Addr    string
					RTPPort int `json:"rtp_port"`
				}
			}
		}
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, l := range sess.Links {
			if l.Kind == "video" && l.Remote == "127.0.0.1:"+strconv.Itoa(vport) && l.Direction == "sendrecv" {
				node = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
			}
		}
		return node != nil
	})

	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	sdpPath := filepath.Join(t.TempDir(), "phone.sdp")
	if err := os.WriteFile(sdpPath, []byte("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=phone\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"+
		"m=video "+strconv.Itoa(ports[0])+" RTP/AVP 100\r\na=rtpmap:100 VP8/90000\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const w, h = 320, 240
	dec := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-protocol_whitelist", "file,udp,rtp",
		"-reorder_queue_size", "64", "-i", sdpPath, "-fps_mode", "passthrough", "-vf", "scale=320:240", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	out, err := dec.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startChild(t, dec)
	frames := make(chan []byte, 64)
	go func() {
		defer close(frames)
		for {
			f := make([]byte, w*h*3)
			if _, err := io.ReadFull(out, f); err != nil {
				return
			}
			select {
			case frames <- f:
			default:
			}
		}
	}()
	var wrongPT, received atomic.Int64
	// One stream across the switch: the phone's decoder (ffmpeg's RTP
	// demuxer and its reorder buffer) drops a new source whose sequence
	// numbers are behind the old one's.
	var streamMu sync.Mutex
	var ssrcs []uint32
	var lastSeq uint16
	var jumps []string
	go func() {
		buf := make([]byte, 2048)
		to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ports[0]}
		for {
			k, from, err := sock.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if from.Port != node.Port || k < 12 {
				continue
			}
			n := received.Add(1)
			if buf[1]&0x7f != 100 {
				wrongPT.Add(1)
			}
			ssrc, seq := binary.BigEndian.Uint32(buf[8:]), binary.BigEndian.Uint16(buf[2:])
			streamMu.Lock()
			if !slices.Contains(ssrcs, ssrc) {
				ssrcs = append(ssrcs, ssrc)
			}
			if d := int16(seq - lastSeq); n > 1 && (d < 1 || d > 50) && len(jumps) < 10 {
				jumps = append(jumps, strconv.Itoa(int(lastSeq))+"→"+strconv.Itoa(int(seq)))
			}
			lastSeq = seq
			streamMu.Unlock()
			sock.WriteToUDP(buf[:k], to)
		}
	}()
	// The phone's own camera gives consent (the node sends nothing before).
	phoneCameraOf(t, bin, "libvpx", "color=c=blue:s=320x240:r=15:d=40", sock, node)

	colourOf := func(f []byte) string {
		got := mean(f, w, w/4, h/4, 3*w/4, 3*h/4)
		for _, c := range testColours {
			ok := true
			for k := range 3 {
				if d := got[k] - c.rgb[k]; d > 60 || d < -60 {
					ok = false
				}
			}
			if ok {
				return c.name
			}
		}
		return ""
	}
	waitColour := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		seen := ""
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatal("the phone's decoder ended")
				}
				if seen = colourOf(f); seen == want {
					return
				}
			case <-deadline:
				t.Fatalf("the phone saw %q, not %s, in 20 s (%d packets received)", seen, want, received.Load())
			}
		}
	}
	waitColour(first)
	t.Logf("while nobody speaks the phone sees the first camera, %s", first)

	// The other member speaks: the phone's picture follows.
	talk := udpConn(t)
	al := addLink(t, n, s.ID, map[string]any{"remote": talk.LocalAddr().String(), "kind": "audio", "direction": "sendonly", "member": members[speaker]})
	stop := make(chan struct{})
	defer close(stop)
	go pcmuTone(talk, &net.UDPAddr{IP: net.ParseIP(al.Local.Addr), Port: al.Local.RTPPort}, 440, stop, nil)
	waitColour(speaker)
	t.Logf("the phone sees the speaker's camera, %s", speaker)
	if wrongPT.Load() != 0 {
		t.Errorf("%d of %d packets to the phone were not its payload type 100", wrongPT.Load(), received.Load())
	}
	streamMu.Lock()
	if len(ssrcs) != 1 || len(jumps) != 0 {
		t.Errorf("the phone received SSRCs %v with sequence jumps %v, want one stream across the switch", ssrcs, jumps)
	}
	streamMu.Unlock()
	phone.wait(t)
}

// TestVideoPhoneBehindNATIsLatched: a SIPp video phone's SDP names a
// private address (10.11.12.13, audio at 4000, video at 4002) while its
// media come from two sockets on 127.0.0.1, where its SIP comes from, as
// a phone behind NAT's do (its NAT maps the two streams to two ports).
// Its camera starts first: the audio link, latching on the same IP, does
// not take it. Each link learns its own source: the session gets the
// phone's camera and its voice, the phone gets video (its composite) and
// the mix.
func TestVideoPhoneBehindNATIsLatched(t *testing.T) {
	bin := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "video phone behind NAT")
	phone := startSIPpAs(t, ctx, n, "dialin_video_nat.xml", s.ID, "carol", carolPass, 40*time.Second, "-d", "15000")
	links := func() (audio, video linkJSON) {
		var sess struct{ Links []linkJSON }
		call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &sess)
		for _, l := range sess.Links {
			switch l.Remote {
			case "10.11.12.13:4000":
				audio = l
			case "10.11.12.13:4002":
				video = l
			}
		}
		return audio, video
	}
	testutil.WaitFor(t, 15*time.Second, "the phone's links", func() bool { a, v := links(); return a.ID != "" && v.ID != "" })
	node := net.UDPAddrFromAddrPort(n.socks.RTP.LocalAddr())
	natVideo, natAudio := udpConn(t), udpConn(t)
	var videoIn atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			k, err := natVideo.Read(buf)
			if err != nil {
				return
			}
			if k >= 12 {
				videoIn.Add(1)
			}
		}
	}()
	phoneCamera(t, bin, "libvpx", natVideo, node, 15)
	_, v := links()
	testutil.WaitFor(t, 10*time.Second, "the phone's camera in the session", func() bool { _, v = links(); return v.Stats.PacketsIn > 10 })
	speak := make(chan struct{})
	defer close(speak)
	go pcmuTone(natAudio, node, 1000, speak, nil)
	heard := heardPCMU(natAudio, 3*time.Second)
	if len(heard) < 8000 {
		t.Errorf("the phone behind NAT heard %d samples of the mix in 3 s", len(heard))
	}
	testutil.WaitFor(t, 20*time.Second, "video to the phone behind NAT", func() bool { return videoIn.Load() > 10 })
	a, v := links()
	t.Logf("audio link: %d packets in, %d out; video link: %d in, %d out; the phone's video socket got %d",
		a.Stats.PacketsIn, a.Stats.PacketsOut, v.Stats.PacketsIn, v.Stats.PacketsOut, videoIn.Load())
	if a.Stats.PacketsIn < 50 {
		t.Errorf("the session heard %d packets of the phone's voice", a.Stats.PacketsIn)
	}
	if got := metricValue(t, n, `convene_media_latched_total{socket="rtp"}`); got != 2 {
		t.Errorf("RTP sources latched: %v, want the phone's 2", got)
	}
	phone.wait(t)
}
