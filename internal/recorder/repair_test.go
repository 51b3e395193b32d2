package recorder

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/rtpdump"
)

// TestRepairTorn: a recording left "recording" with a torn last record,
// a stream file torn inside its header, a missing sidecar and a torn
// event line is cut back to whole records, marked interrupted, and reads.
func TestRepairTorn(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "rec1")
	os.Mkdir(dir, 0o755)
	start := time.Unix(1_700_000_000, 0).UTC()
	man := Manifest{Version: ManifestVersion, Session: "s", State: StateRecording, Started: start,
		Streams: []StreamEntry{{File: "001-audio-000000a1.rtpdump", Sidecar: "001-audio-000000a1.json", SSRC: 0xa1, Kind: "audio", Member: "alice"}}}
	if err := writeJSON(filepath.Join(dir, ManifestFile), &man, false); err != nil {
		t.Fatal(err)
	}
	side := Sidecar{Version: 1, File: "001-audio-000000a1.rtpdump", SSRC: 0xa1, Kind: "audio", Member: "alice",
		ClockRate: 8000, PayloadTypes: []PayloadType{{PT: 0, Codec: "audio/PCMU", ClockRate: 8000}}, State: StateRecording}
	writeJSON(filepath.Join(dir, "001-audio-000000a1.json"), &side, false)

	// Stream 1: ten whole records, an SR, then half of an eleventh.
	var file bytes.Buffer
	w := rtpdump.NewWriter(&file, rtpdump.Header{Start: start}, 0)
	for i := 0; i < 10; i++ {
		w.WriteRTP(uint32(20*i), rtp(0, uint16(i), 0xa1, 160))
	}
	w.WriteRTCP(150, senderReport(0xa1, 0xe8f0000000000000, 1234))
	w.Flush()
	whole := file.Len()
	torn := append(file.Bytes(), 0, 180, 0, 172, 0, 0, 0, 220, 0x80, 0, 0)
	os.WriteFile(filepath.Join(dir, "001-audio-000000a1.rtpdump"), torn, 0o644)
	// Stream 2: created, never flushed; no sidecar, not in the manifest.
	os.WriteFile(filepath.Join(dir, "002-video-00000b0b.rtpdump"), []byte("#!rtpplay1.0 0.0"), 0o644)
	os.WriteFile(filepath.Join(dir, EventsFile),
		[]byte(`{"at":"2023-11-14T22:13:20Z","offset_ms":5,"kind":"member_joined","member":"alice"}`+"\n"+`{"at":"2023-11-14T2`), 0o644)
	// A finished recording beside it is left alone.
	done := filepath.Join(root, "rec0")
	os.Mkdir(done, 0o755)
	writeJSON(filepath.Join(done, ManifestFile), &Manifest{Version: 1, State: StateFinished, Started: start}, false)

	reps, err := Repair(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Dir != dir || reps[0].Streams != 2 || reps[0].Records != 11 ||
		reps[0].Cut != int64(len(torn)-whole+16) {
		t.Fatalf("repaired %+v (torn %d bytes past %d)", reps, len(torn)-whole, whole)
	}
	got, err := readAll(t, filepath.Join(dir, "001-audio-000000a1.rtpdump"))
	if err != nil || len(got) != 11 {
		t.Fatalf("after repair: %d records, %v", len(got), err)
	}
	for i := 0; i < 10; i++ {
		if !bytes.Equal(got[i].Data, rtp(0, uint16(i), 0xa1, 160)) || got[i].Offset != uint32(20*i) {
			t.Fatalf("record %d differs", i)
		}
	}
	if got, err := readAll(t, filepath.Join(dir, "002-video-00000b0b.rtpdump")); err != nil || len(got) != 0 {
		t.Fatalf("the file torn in its header: %d records, %v", len(got), err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != StateInterrupted || len(m.Streams) != 2 || m.Ended == nil || !m.Ended.Equal(start.Add(180*time.Millisecond)) {
		t.Fatalf("manifest %+v", m)
	}
	if len(m.Events) != 2 || m.Events[0].Kind != MemberJoined || m.Events[1].Kind != RecordingStopped {
		t.Fatalf("events %+v", m.Events)
	}
	s := readSidecar(t, dir, "001-audio-000000a1.json")
	if s.State != StateInterrupted || s.Packets != 10 || s.RTCPPackets != 1 || len(s.SenderReports) != 1 ||
		s.SenderReports[0].RTP != 1234 || s.Member != "alice" || s.ClockRate != 8000 {
		t.Fatalf("sidecar %+v", s)
	}
	s2 := readSidecar(t, dir, "002-video-00000b0b.json")
	if s2.Kind != "video" || s2.State != StateInterrupted {
		t.Fatalf("rebuilt sidecar %+v", s2)
	}
	if again, err := Repair(root); err != nil || len(again) != 0 {
		t.Fatalf("second Repair: %+v %v", again, err)
	}
	if m0, _ := ReadManifest(done); m0.State != StateFinished {
		t.Fatalf("the finished recording became %q", m0.State)
	}
}
