package node

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/convene/convene/internal/testutil"
)

type adHocJSON struct {
	recordingJSON
	Endpoint struct {
		RTP     string            `json:"rtp"`
		RTCP    string            `json:"rtcp"`
		Sources []string          `json:"sources"`
		Packets uint64            `json:"packets"`
		Dropped map[string]uint64 `json:"dropped"`
	} `json:"endpoint"`
}

// TestAdHocRecordingOfFFmpeg: the operator opens an ad-hoc recording (no
// session, Voyager's recording endpoint) and ffmpeg sends its tone (PCMU)
// and test card (VP8 on payload type 96, named in the request) to its one
// port (the first sender reports come before the first RTP packets): each stream's file holds exactly the datagrams ffmpeg sent, in
// order, RTCP included; the recording exports as a WebM that ffprobe and
// ffmpeg read. A session's chair may not open one.
func TestAdHocRecordingOfFFmpeg(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	ffprobe := testutil.NeedBinary(t, "ffprobe")
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	url := n.URL() + "/api/v1/recordings"
	s := createSession(t, n, "not this one")
	_, ctok := joinAs(t, n, s.ID, "Chair", "chair")
	if code := callAs(t, ctok, "POST", url, map[string]any{}, nil); code != 401 {
		t.Errorf("a chair opens an ad-hoc recording: %d, want 401 (it needs the API key)", code)
	}
	if code := callNoAuth(t, "POST", url); code != 401 {
		t.Errorf("a stranger opens an ad-hoc recording: %d, want 401", code)
	}
	if code := call(t, "POST", url, map[string]any{"payload_types": map[string]string{"96": "XYZ/90000"}}, nil); code != 400 {
		t.Errorf("an unknown codec: %d, want 400", code)
	}
	var rec adHocJSON
	if code := call(t, "POST", url, map[string]any{"title": "lab bench", "payload_types": map[string]string{"96": "VP8/90000"}}, &rec); code != 201 {
		t.Fatalf("open: %d", code)
	}
	if rec.Session != "" || rec.State != "recording" || len(rec.Endpoint.Sources) != 1 || rec.Endpoint.Sources[0] != "127.0.0.1/32" {
		t.Fatalf("opened %+v", rec)
	}
	rtp, rtcp := netip.MustParseAddrPort(rec.Endpoint.RTP), netip.MustParseAddrPort(rec.Endpoint.RTCP)
	var to linkJSON
	to.Local.Addr, to.Local.RTPPort, to.Local.RTCPPort = rtp.Addr().String(), int(rtp.Port()), int(rtcp.Port())

	audioTee, videoTee := newTee(t), newTee(t)
	audioTee.run(to)
	videoTee.run(to)
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re",
		"-f", "lavfi", "-i", "sine=frequency=440:duration=3",
		"-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=3",
		"-map", "0:a", "-ar", "8000", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp", "rtp://"+audioTee.target(),
		"-map", "1:v", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-payload_type", "96",
		"-f", "rtp", "rtp://"+videoTee.target())
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	audioTee.wg.Wait()
	videoTee.wg.Wait()
	var live adHocJSON
	call(t, "GET", url+"/"+rec.ID, nil, &live)
	sent := uint64(len(audioTee.rtp) + len(audioTee.rtcp) + len(videoTee.rtp) + len(videoTee.rtcp))
	if live.Endpoint.Packets != sent || len(live.Endpoint.Dropped) != 0 {
		t.Errorf("the endpoint took %d datagrams and dropped %v; %d were sent", live.Endpoint.Packets, live.Endpoint.Dropped, sent)
	}
	if code := call(t, "POST", url+"/"+rec.ID+"/stop", map[string]any{}, &rec.recordingJSON); code != 200 || rec.State != "finished" {
		t.Fatalf("stop: %d %+v", code, rec.recordingJSON)
	}
	var got recordingJSON
	call(t, "GET", url+"/"+rec.ID, nil, &got)
	for _, c := range []struct {
		kind, codec string
		tee         *tee
	}{{"audio", "audio/PCMU", audioTee}, {"video", "video/VP8", videoTee}} {
		var rtpGot, rtcpGot [][]byte
		for _, f := range got.Files {
			if f.Kind != c.kind {
				continue
			}
			if !f.RTCPOnly && (len(f.PayloadTypes) != 1 || f.PayloadTypes[0].Codec != c.codec) {
				t.Errorf("%s: payload types %+v, want %s", c.kind, f.PayloadTypes, c.codec)
			}
			r, rc := readDump(t, filepath.Join(dataDir, "recordings", rec.ID, f.File))
			rtpGot, rtcpGot = append(rtpGot, r...), append(rtcpGot, rc...)
		}
		if len(c.tee.rtp) < 40 || !sameDatagrams(rtpGot, c.tee.rtp) {
			t.Errorf("%s: %d RTP packets recorded, %d sent; not the same bytes in the same order", c.kind, len(rtpGot), len(c.tee.rtp))
		}
		if !sameDatagrams(rtcpGot, c.tee.rtcp) {
			t.Errorf("%s: %d RTCP packets recorded, %d sent", c.kind, len(rtcpGot), len(c.tee.rtcp))
		}
	}
	path, size := download(t, url+"/"+rec.ID+"/export?format=webm", "webm")
	p := probe(t, ffprobe, path)
	dur, _ := strconv.ParseFloat(p.Format.Duration, 64)
	if want := float64(rec.DurationMS) / 1000; len(p.Streams) != 2 || dur < 0.9*want || dur > 1.1*want {
		t.Errorf("the WebM export (%d bytes): %+v", size, p)
	}
	if b, err := decodeAll(ffmpeg, path); err != nil || len(b) > 0 {
		t.Errorf("ffmpeg decodes the export with %v: %s", err, b)
	}
}
