package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtpdump"
)

// writeTone writes a finished 2 s recording with one second of PCMU
// under dataDir/recordings/rid, as the recorder lays it out.
func writeTone(t *testing.T, dataDir, rid string) {
	t.Helper()
	dir := filepath.Join(dataDir, "recordings", rid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	end := start.Add(2 * time.Second)
	f, _ := os.Create(filepath.Join(dir, "001-audio-1.rtpdump"))
	w := rtpdump.NewWriter(f, rtpdump.Header{Start: start}, 0)
	for i := range 50 {
		b := make([]byte, 12+160)
		b[0] = 0x80
		binary.BigEndian.PutUint16(b[2:], uint16(i))
		binary.BigEndian.PutUint32(b[4:], uint32(i*160))
		binary.BigEndian.PutUint32(b[8:], 1)
		for j := 12; j < len(b); j++ {
			b[j] = 0x90
		}
		w.WriteRTP(uint32(500+20*i), b)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	put := func(name string, v any) {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("001-audio-1.json", recorder.Sidecar{Version: recorder.SidecarVersion, File: "001-audio-1.rtpdump", SSRC: 1,
		Kind: "audio", ClockRate: 8000, PayloadTypes: []recorder.PayloadType{{PT: 0, Codec: "audio/PCMU", ClockRate: 8000}},
		FirstPacket: start.Add(500 * time.Millisecond), Packets: 50, SenderReports: []recorder.SenderReport{}, State: recorder.StateFinished})
	put(recorder.ManifestFile, recorder.Manifest{Version: recorder.ManifestVersion, Session: "s_x", State: recorder.StateFinished,
		Started: start, Ended: &end, Events: []recorder.Event{},
		Streams: []recorder.StreamEntry{{File: "001-audio-1.rtpdump", Sidecar: "001-audio-1.json", SSRC: 1, Kind: "audio"}}})
}

func TestRecordingsExport(t *testing.T) {
	dataDir := t.TempDir()
	writeTone(t, dataDir, "r_abc")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := recordingsCmd(append(args, "-data-dir", dataDir), nil, &out, &errb)
		return code, out.String(), errb.String()
	}
	wav := filepath.Join(t.TempDir(), "tone.wav")
	code, _, errs := run("export", "r_abc", "-o", wav)
	if code != 0 || !strings.Contains(errs, "100%") || !strings.Contains(errs, "0:02 / 0:02") {
		t.Fatalf("export: %d %q", code, errs)
	}
	if fi, err := os.Stat(wav); err != nil || fi.Size() != 44+2*48000*2 {
		t.Errorf("the WAV: %v, %v; want 2 s of 48 kHz", fi, err)
	}
	// -format wins over the extension; "-" is standard output.
	code, out, _ := run("export", "r_abc", "-o", "-", "-format", "ogg")
	if code != 0 || !strings.HasPrefix(out, "OggS") {
		t.Errorf("ogg to stdout: %d, %q", code, out[:min(8, len(out))])
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"export", "r_abc"}, 2},                           // no -o
		{[]string{"export", "r_abc", "-o", "x.mp4"}, 2},            // unknown format
		{[]string{"export", "../r_abc", "-o", wav}, 2},             // not an ID
		{[]string{"export", "r_none", "-o", wav}, 1},               // no such recording
		{[]string{"import", "r_abc", "-o", wav}, 2},                // no such command
		{[]string{"export", "r_abc", "-o", wav, "-bogus", "1"}, 2}, // not a config flag
	} {
		if code, _, errs := run(c.args...); code != c.code {
			t.Errorf("%v: %d, want %d (%q)", c.args, code, c.code, errs)
		}
	}
}
