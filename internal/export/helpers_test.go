package export

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtpdump"
)

// started is the time line's zero of the test recordings.
var started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testPacket is one RTP packet of a test stream: it arrives at Arrival on
// the time line.
type testPacket struct {
	Arrival time.Duration
	TS      uint32
	Seq     uint16
	Marker  bool
	Payload []byte
}

// testStream is a stream to write into a test recording.
type testStream struct {
	File, Kind, Member, Codec string
	Source                    string // the sidecar's
	PT                        uint8
	Rate                      uint32
	SSRC                      uint32
	Packets                   []testPacket
	Reports                   []recorder.SenderReport
}

// writeRecording writes a finished recording of streams into a new
// directory, as the recorder lays it out, ended at end.
func writeRecording(t testing.TB, end time.Duration, streams ...testStream) string {
	t.Helper()
	dir := t.TempDir()
	ended := started.Add(end)
	m := recorder.Manifest{Version: recorder.ManifestVersion, Session: "s_test", State: recorder.StateFinished,
		Started: started, Ended: &ended, Events: []recorder.Event{}}
	for _, s := range streams {
		f, err := os.Create(filepath.Join(dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		w := rtpdump.NewWriter(f, rtpdump.Header{Start: started}, 0)
		for _, p := range s.Packets {
			b := make([]byte, 12+len(p.Payload))
			b[0], b[1] = 0x80, s.PT
			if p.Marker {
				b[1] |= 0x80
			}
			binary.BigEndian.PutUint16(b[2:], p.Seq)
			binary.BigEndian.PutUint32(b[4:], p.TS)
			binary.BigEndian.PutUint32(b[8:], s.SSRC)
			copy(b[12:], p.Payload)
			if err := w.WriteRTP(uint32(p.Arrival/time.Millisecond), b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sidecar := s.File[:len(s.File)-len(".rtpdump")] + ".json"
		sc := recorder.Sidecar{Version: recorder.SidecarVersion, File: s.File, SSRC: s.SSRC, Kind: s.Kind,
			Member: s.Member, Source: s.Source, ClockRate: s.Rate, PayloadTypes: []recorder.PayloadType{{PT: s.PT, Codec: s.Codec, ClockRate: s.Rate}},
			FirstPacket: started.Add(s.Packets[0].Arrival), Packets: uint64(len(s.Packets)),
			SenderReports: s.Reports, State: recorder.StateFinished}
		if sc.SenderReports == nil {
			sc.SenderReports = []recorder.SenderReport{}
		}
		writeFile(t, filepath.Join(dir, sidecar), sc)
		m.Streams = append(m.Streams, recorder.StreamEntry{File: s.File, Sidecar: sidecar, SSRC: s.SSRC, Kind: s.Kind, Member: s.Member})
	}
	writeFile(t, filepath.Join(dir, recorder.ManifestFile), m)
	return dir
}

func writeFile(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pcmu is a stream of n 20 ms PCMU packets of one sample value, the
// first arriving at first (plus jitter[i] for packet i), its timestamps
// from ts0.
func pcmu(file, member string, ssrc uint32, first time.Duration, ts0 uint32, n int, value byte, jitter func(i int) time.Duration) testStream {
	s := testStream{File: file, Kind: "audio", Member: member, Codec: "audio/PCMU", PT: 0, Rate: 8000, SSRC: ssrc}
	for i := range n {
		pl := make([]byte, 160)
		for j := range pl {
			pl[j] = value
		}
		at := first + time.Duration(i)*20*time.Millisecond
		if jitter != nil {
			at += jitter(i)
		}
		s.Packets = append(s.Packets, testPacket{Arrival: at, TS: ts0 + uint32(i)*160, Seq: uint16(i), Payload: pl})
	}
	return s
}

// ntp is the 64-bit NTP timestamp of t.
func ntp(t time.Time) uint64 {
	const epoch = 2208988800
	s := uint64(t.Unix() + epoch)
	f := uint64(t.Nanosecond()) << 32 / 1e9
	return s<<32 | f
}
