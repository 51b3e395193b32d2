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
