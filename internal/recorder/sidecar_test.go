package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

var validSidecar = []byte(`{"version":1,"file":"001-audio-000000a1.rtpdump","ssrc":161,"kind":"audio",
"member":"alice","endpoint":"alice/mic","track":"alice/mic/audio","source":"microphone","clock_rate":48000,
"payload_types":[{"pt":111,"codec":"audio/opus","clock_rate":48000,"channels":2}],
"first_packet":"2026-11-25T07:00:00.123Z","first_offset_ms":123,"packets":10,"bytes":1000,"rtcp_packets":1,
"sender_reports":[{"offset_ms":5000,"ntp":16785408633735299072,"ntp_time":"2026-11-25T07:00:05.5Z","rtp":96000,"packets":7,"octets":700}],
"state":"finished"}`)

func TestParseSidecar(t *testing.T) {
	s, err := ParseSidecar(validSidecar)
	if err != nil || s.SSRC != 161 || len(s.SenderReports) != 1 || s.PayloadTypes[0].Codec != "audio/opus" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"version":2}`, `{"version":1,"file":"../x.rtpdump","kind":"audio","state":"finished"}`,
		`{"version":1,"file":"a/b.rtpdump","kind":"audio","state":"finished"}`,
		`{"version":1,"file":"x.wav","kind":"audio","state":"finished"}`,
		`{"version":1,"file":"x.rtpdump","kind":"text","state":"finished"}`,
		`{"version":1,"file":"x.rtpdump","kind":"audio","state":"done"}`,
		`{"version":1,"file":"x.rtpdump","kind":"audio","state":"finished","payload_types":[{"pt":200}]}`,
		`{"version":1,"file":"x.rtpdump","kind":"audio","state":"finished"} {}`,
	} {
		if _, err := ParseSidecar([]byte(bad)); !errors.Is(err, ErrBadSidecar) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// FuzzParseSidecar: any input is a sidecar or ErrBadSidecar, never a
// panic; a sidecar written again parses to the same.
func FuzzParseSidecar(f *testing.F) {
	f.Add(validSidecar)
	f.Add([]byte(`{"version":1,"file":"x.rtpdump","kind":"video","state":"recording","rtcp_only":true}`))
	f.Add([]byte(`{"version":1,"file":"x.rtpdump","kind":"audio","state":"finished","sender_reports":[{"ntp":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSidecar(b)
		if err != nil {
			if !errors.Is(err, ErrBadSidecar) {
				t.Fatalf("error %v", err)
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := ParseSidecar(out)
		if err != nil {
			t.Fatalf("rewritten sidecar: %v\n%s", err, out)
		}
		out2, _ := json.Marshal(s2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("rewritten\n%s\n%s", out, out2)
		}
	})
}

// TestSubgroupTrack: a track in a subgroup, which OnChange does not
// announce to a main-session member, is found by the flush timer's scan.
func TestSubgroupTrack(t *testing.T) {
	room := broker.NewRoom("s")
	dir := t.TempDir()
	rec, err := Start(room, dir, Options{FlushEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := room.Join(broker.Member{ID: "g", Kind: media.Audio, Sends: true, Group: "breakout"})
	deadline := time.Now().Add(5 * time.Second)
	for tr.Subscribers() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		tr.Publish(packet(rtp(0, uint16(i), 3, 160)))
	}
	rec.Stop()
	m, _ := ReadManifest(dir)
	if len(m.Streams) != 1 {
		t.Fatalf("streams %+v", m.Streams)
	}
	if got, err := readAll(t, filepath.Join(dir, m.Streams[0].File)); err != nil || len(got) != 5 {
		t.Fatalf("%d packets, %v", len(got), err)
	}
}

// TestRTCPOnly: a receiver's reports (an SSRC that sends no RTP) go to a
// stream file of their own marked rtcp_only; a sender report ahead of its
// RTP does too, and the RTP stream then takes that SSRC's later RTCP; its
// sidecar has the early report's clock mapping as well as the later one.
func TestRTCPOnly(t *testing.T) {
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "p", Kind: media.Audio, Sends: true})
	room.Join(broker.Member{ID: "l", Kind: media.Audio, RTCPSink: broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release() })})
	dir := t.TempDir()
	rec, err := Start(room, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rr := []byte{0x80, 201, 0, 1, 0, 0, 0, 0x42}
	room.PublishRTCP("l", media.Audio, packet(rr))
	room.PublishRTCP("p", media.Audio, packet(senderReport(9, 1<<32, 0)))
	tr.Publish(packet(rtp(0, 1, 9, 160)))
	room.PublishRTCP("p", media.Audio, packet(senderReport(9, 2<<32, 8000)))
	room.PublishRTCP("p", media.Audio, packet([]byte{0x80, 200, 0, 0})) // too short to be an SR: malformed
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	m, _ := ReadManifest(dir)
	if len(m.Streams) != 3 || !m.Streams[0].RTCPOnly || m.Streams[0].SSRC != 0x42 ||
		!m.Streams[1].RTCPOnly || m.Streams[1].SSRC != 9 || m.Streams[2].RTCPOnly || m.Streams[2].SSRC != 9 {
		t.Fatalf("streams %+v", m.Streams)
	}
	s := readSidecar(t, dir, m.Streams[2].Sidecar)
	if s.Packets != 1 || s.RTCPPackets != 1 || len(s.SenderReports) != 2 || s.SenderReports[0].RTP != 0 || s.SenderReports[1].RTP != 8000 {
		t.Fatalf("RTP stream's sidecar %+v", s)
	}
	if got, err := readAll(t, filepath.Join(dir, m.Streams[0].File)); err != nil || len(got) != 1 || !got[0].RTCP {
		t.Fatalf("receiver report file: %+v %v", got, err)
	}
	if rec.Stats().Dropped[dropMalformed] != 1 {
		t.Errorf("dropped %v", rec.Stats().Dropped)
	}
}
