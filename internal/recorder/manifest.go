package recorder

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ManifestVersion is the version of the manifest layout written here.
const ManifestVersion = 1

// File names in a recording's directory.
const (
	ManifestFile = "manifest.json"
	EventsFile   = "events.jsonl"
)

// State is where a recording (or a stream of it) stands.
type State string

// States.
const (
	StateRecording   State = "recording"   // being written, or the writer died
	StateFinished    State = "finished"    // stopped cleanly
	StateInterrupted State = "interrupted" // the process died; Repair made it readable
	StateFailed      State = "failed"      // a write failed; what was written is readable
)

func (s State) valid() bool {
	return s == StateRecording || s == StateFinished || s == StateInterrupted || s == StateFailed
}

// Manifest describes a recording of a session.
type Manifest struct {
	Version int        `json:"version"`
	Session string     `json:"session"`
	State   State      `json:"state"`
	Started time.Time  `json:"started"` // the time line's zero, every file's header Start
	Ended   *time.Time `json:"ended,omitempty"`
	Error   string     `json:"error,omitempty"`
	// Dropped counts packets the recording lost, by reason.
	Dropped map[string]uint64 `json:"dropped,omitempty"`
	Streams []StreamEntry     `json:"streams"`
	// Events is the time line; while recording it grows in events.jsonl
	// and ReadManifest merges it.
	Events []Event `json:"events"`
}

// StreamEntry names one stream's files.
type StreamEntry struct {
	File     string `json:"file"`
	Sidecar  string `json:"sidecar"`
	SSRC     uint32 `json:"ssrc"`
	Kind     string `json:"kind"`
	Member   string `json:"member,omitempty"`
	Track    string `json:"track,omitempty"`
	RTCPOnly bool   `json:"rtcp_only,omitempty"`
}

// EventKind says what happened. The caller's kinds come first; the
// recorder adds the others itself.
type EventKind string

// Event kinds.
const (
	MemberJoined  EventKind = "member_joined"
	MemberLeft    EventKind = "member_left"
	FloorGranted  EventKind = "floor_granted"
	FloorReleased EventKind = "floor_released"
	SpeakerChange EventKind = "speaker"

	RecordingStarted EventKind = "recording_started"
	RecordingStopped EventKind = "recording_stopped"
	StreamStarted    EventKind = "stream_started"
	SlowDisk         EventKind = "slow_disk"   // the queue overflowed: packets were dropped
	WriteError       EventKind = "write_error" // the recording stopped
	// Message is a conversation message (chat, whiteboard): Detail holds
	// its wire form in base64, Stream "flow/seq".
	Message EventKind = "message"
)

// Event is one entry of the time line.
type Event struct {
	// At is the wall-clock time, OffsetMS the same on the recording's
	// time line; Recording.Event fills both when they are zero.
	At       time.Time `json:"at"`
	OffsetMS uint32    `json:"offset_ms"`
	Kind     EventKind `json:"kind"`
	Member   string    `json:"member,omitempty"`
	Floor    string    `json:"floor,omitempty"`  // "audio", "video"
	Stream   string    `json:"stream,omitempty"` // a stream's file
	Detail   string    `json:"detail,omitempty"`
}

// ReadManifest reads a recording's manifest; for a recording still being
// written (or never finished) it adds the events from events.jsonl.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("recorder: %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if m.Version != ManifestVersion || !m.State.valid() {
		return nil, fmt.Errorf("recorder: %s: version %d, state %q", filepath.Join(dir, ManifestFile), m.Version, m.State)
	}
	if m.State == StateRecording {
		evs, err := readEvents(filepath.Join(dir, EventsFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		m.Events = append(m.Events, evs...)
	}
	return &m, nil
}

// readEvents reads an events.jsonl; a torn or garbled line ends it.
func readEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &e); err != nil {
			break
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// writeJSON writes v to path atomically: a temporary file, renamed over
// path. With sync it is fsynced first (a rename survives kill -9 without,
// since the kernel has the data; a power cut needs the fsync).
func writeJSON(path string, v any, sync bool) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
