package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/convene/convene/internal/rtpdump"
)

// Repaired reports what Repair did to one recording.
type Repaired struct {
	Dir     string
	Streams int
	Records int   // whole records kept
	Cut     int64 // bytes of torn records removed
}

// Repair finds the recordings under dir (dir itself, and each directory
// in it, that has a manifest) whose manifest still says "recording" — the
// process died while writing them — and makes each readable: every stream
// file is cut after its last whole record (a file torn inside its header
// gets a fresh header with no records), its sidecar's counts and sender
// reports are rebuilt from the file, the time line is taken from
// events.jsonl, and the manifest is marked interrupted. Run it at start-up,
// before recording into dir again.
func Repair(dir string) ([]Repaired, error) {
	dirs := []string{dir}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	var out []Repaired
	var errs []error
	for _, d := range dirs {
		m, err := ReadManifest(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m.State != StateRecording {
			continue
		}
		rep, err := repairOne(d, m)
		if err != nil {
			errs = append(errs, fmt.Errorf("recorder: repairing %s: %w", d, err))
			continue
		}
		out = append(out, rep)
	}
	return out, errors.Join(errs...)
}

func repairOne(dir string, m *Manifest) (Repaired, error) {
	rep := Repaired{Dir: dir}
	files, err := filepath.Glob(filepath.Join(dir, "*.rtpdump"))
	if err != nil {
		return rep, err
	}
	sort.Strings(files)
	known := map[string]StreamEntry{}
	for _, e := range m.Streams {
		known[e.File] = e
	}
	var streams []StreamEntry
	last := uint32(0)
	for _, path := range files {
		name := filepath.Base(path)
		side, cut, records, err := repairStream(dir, name, m.Started)
		if err != nil {
			return rep, err
		}
		rep.Streams++
		rep.Records += records
		rep.Cut += cut
		if e, ok := known[name]; ok {
			streams = append(streams, e)
		} else {
			streams = append(streams, StreamEntry{File: name, Sidecar: strings.TrimSuffix(name, ".rtpdump") + ".json",
				SSRC: side.SSRC, Kind: side.Kind, Member: side.Member, Track: side.Track, RTCPOnly: side.RTCPOnly})
		}
		last = max(last, side.lastMS)
	}
	for _, tmp := range mustGlob(filepath.Join(dir, "*.tmp")) {
		os.Remove(tmp)
	}
	m.Streams = streams
	if m.Streams == nil {
		m.Streams = []StreamEntry{}
	}
	if m.Events == nil {
		m.Events = []Event{}
	}
	for _, e := range m.Events {
		last = max(last, e.OffsetMS)
	}
	end := m.Started.Add(time.Duration(last) * time.Millisecond)
	m.State, m.Ended = StateInterrupted, &end
	m.Events = append(m.Events, Event{At: time.Now().UTC(), OffsetMS: last, Kind: RecordingStopped,
		Detail: fmt.Sprintf("interrupted; repaired: %d torn bytes cut", rep.Cut)})
	if err := writeJSON(filepath.Join(dir, ManifestFile), m, true); err != nil {
		return rep, err
	}
	syncDir(dir)
	return rep, nil
}

func mustGlob(p string) []string {
	m, _ := filepath.Glob(p)
	return m
}

// repaired is a sidecar rebuilt from its stream file.
type repaired struct {
	*Sidecar
	lastMS uint32
}

// repairStream cuts a stream file after its last whole record and
// rewrites its sidecar from what the file holds.
func repairStream(dir, name string, start time.Time) (repaired, int64, int, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return repaired{}, 0, 0, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return repaired{}, 0, 0, err
	}
	base := strings.TrimSuffix(name, ".rtpdump")
	side := &Sidecar{}
	if b, err := os.ReadFile(filepath.Join(dir, base+".json")); err == nil {
		if s, err := ParseSidecar(b); err == nil {
			side = s
		}
	}
	if side.Version == 0 { // no sidecar, or a bad one: what the name says
		side = &Sidecar{Version: SidecarVersion, File: name, PayloadTypes: []PayloadType{}}
		if parts := strings.Split(base, "-"); len(parts) == 3 {
			side.Kind = parts[1]
		}
		side.RTCPOnly = true
	}
	side.Packets, side.Bytes, side.RTCPPackets, side.SenderReports = 0, 0, 0, []SenderReport{}
	side.State = StateInterrupted
	if side.Kind != "audio" && side.Kind != "video" {
		side.Kind = "audio"
	}
	rp := repaired{Sidecar: side}

	f.Seek(0, io.SeekStart)
	r, err := rtpdump.NewReader(f)
	good := int64(0)
	if err != nil {
		// Torn inside the header: the process died before the first
		// flush. Start the file again with no records.
		if err := f.Truncate(0); err != nil {
			return rp, 0, 0, err
		}
		w := rtpdump.NewWriter(f, rtpdump.Header{Start: start}, 0)
		f.Seek(0, io.SeekStart)
		if err := w.Flush(); err != nil {
			return rp, 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return rp, 0, 0, err
		}
		return rp, size, 0, writeJSON(filepath.Join(dir, base+".json"), side, true)
	}
	first := true
	for {
		p, err := r.Next()
		if err != nil {
			good = r.Offset()
			if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, rtpdump.ErrBadRecord) {
				return rp, 0, 0, err
			}
			break
		}
		rp.lastMS = max(rp.lastMS, p.Offset)
		side.Bytes += uint64(len(p.Data))
		if p.RTCP {
			side.RTCPPackets++
			side.SenderReports = append(side.SenderReports, senderReports(p.Data, p.Offset)...)
		} else {
			side.Packets++
			if len(p.Data) >= 12 {
				side.RTCPOnly = false
				if first && side.SSRC == 0 {
					side.SSRC = binary.BigEndian.Uint32(p.Data[8:])
				}
			}
		}
		if first {
			first = false
			if side.FirstPacket.IsZero() {
				side.FirstOffsetMS = p.Offset
				side.FirstPacket = start.Add(time.Duration(p.Offset) * time.Millisecond).UTC()
			}
		}
	}
	if good < size {
		if err := f.Truncate(good); err != nil {
			return rp, 0, 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return rp, 0, 0, err
	}
	return rp, size - good, r.Records(), writeJSON(filepath.Join(dir, base+".json"), side, true)
}

// senderReports returns the clock mappings of the sender reports in a
// compound RTCP packet.
func senderReports(b []byte, at uint32) []SenderReport {
	var out []SenderReport
	for len(b) >= 4 {
		n := 4 * (int(binary.BigEndian.Uint16(b[2:])) + 1)
		if n > len(b) {
			break
		}
		if b[1] == 200 && n >= 28 {
			ntp := binary.BigEndian.Uint64(b[8:])
			out = append(out, SenderReport{OffsetMS: at, NTP: ntp, NTPTime: ntpTime(ntp),
				RTP: binary.BigEndian.Uint32(b[16:]), Packets: binary.BigEndian.Uint32(b[20:]),
				Octets: binary.BigEndian.Uint32(b[24:])})
		}
		b = b[n:]
	}
	return out
}
