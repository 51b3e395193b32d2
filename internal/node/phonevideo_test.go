package node

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media/ivfwriter"

	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/testutil"
)

// TestVideoPhonePublishesItsCamera: a SIPp phone dials in offering audio
// and video (H.263, then VP8): the node's 200 answers both m-lines, the
// video in VP8 at the node's port and recvonly; the phone's camera
// (ffmpeg's VP8 test card, 320×240, sent from the port its SDP named)
// becomes a video track of its member that a WebRTC member (pion, in
// the session before the phone) receives: ffprobe decodes what it received, 320 wide. Hanging up
// removes the member.
func TestVideoPhonePublishesItsCamera(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	n, ctx := newSIPpNode(t)
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
		"-set", "vport", strconv.Itoa(vport), "-trace_msg")
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
	if video.Member == "" || video.Direction != "sendonly" {
		t.Errorf("the phone's video link %+v, want its member's, sendonly", video)
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
		!strings.Contains(ok, "a=rtpmap:100 VP8/90000") || !strings.Contains(ok, "a=recvonly") {
		t.Errorf("the 200's SDP does not answer the video in VP8, recvonly, after the audio:\n%s", ok)
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
