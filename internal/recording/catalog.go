package recording

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/recorder"
)

// Recording is a recording as the API shows it.
type Recording struct {
	ID          string     `json:"id"`
	Session     string     `json:"session"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Owner       string     `json:"owner"`
	State       string     `json:"state"` // recording, finished, interrupted, failed
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	DurationMS  int64      `json:"duration_ms"`
	SizeBytes   int64      `json:"size_bytes"`
	Streams     int        `json:"streams"`
	Error       string     `json:"error,omitempty"`
	// Node writes the recording (in a cluster); Segment counts the nodes
	// that wrote it, one more each time a survivor continued it.
	Node    string `json:"node,omitempty"`
	Segment int    `json:"segment"`
}

func view(r catalog.Recording) Recording {
	v := Recording{ID: r.ID, Session: r.SessionID, Title: r.Title, Description: r.Description, Owner: r.Owner,
		State: r.State, StartedAt: r.StartedAt, DurationMS: r.Duration.Milliseconds(), SizeBytes: r.SizeBytes,
		Streams: r.Streams, Error: r.Error, Node: r.Node, Segment: max(r.Segment, 1)}
	if !r.EndedAt.IsZero() {
		e := r.EndedAt
		v.EndedAt = &e
	}
	return v
}

// Detail is a recording with what its directory holds: one entry per
// stream file (from the sidecars) and the time line.
type Detail struct {
	Recording
	Files    []File           `json:"files"`
	Timeline []recorder.Event `json:"timeline"`
	// Dropped counts packets the recording lost, by reason.
	Dropped map[string]uint64 `json:"dropped,omitempty"`
	// Endpoint is a running ad-hoc recording's.
	Endpoint *Endpoint `json:"endpoint,omitempty"`
	// Segments are the parts of the recording written by one node each
	// (more than one when a node died and another continued it); Files
	// and Timeline are those of the last segment this node wrote (on a
	// lone node, the only one).
	Segments []Segment `json:"segments"`
}

// Segment is one node's part of a recording.
type Segment struct {
	Seq       int        `json:"seq"`
	Node      string     `json:"node,omitempty"`
	State     string     `json:"state"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	SizeBytes int64      `json:"size_bytes"`
	Streams   int        `json:"streams"`
}

// segmentViews are a recording's segments as the API shows them.
func segmentViews(gs []catalog.Segment) []Segment {
	out := make([]Segment, 0, len(gs))
	for _, g := range gs {
		v := Segment{Seq: g.Seq, Node: g.Node, State: g.State, StartedAt: g.StartedAt, SizeBytes: g.SizeBytes, Streams: g.Streams}
		if !g.EndedAt.IsZero() {
			e := g.EndedAt
			v.EndedAt = &e
		}
		out = append(out, v)
	}
	return out
}

// File is one stream's rtpdump file as its sidecar describes it.
type File struct {
	File          string                 `json:"file"`
	SSRC          uint32                 `json:"ssrc"`
	Kind          string                 `json:"kind"`
	Member        string                 `json:"member,omitempty"`
	Track         string                 `json:"track,omitempty"`
	RTCPOnly      bool                   `json:"rtcp_only,omitempty"`
	ClockRate     uint32                 `json:"clock_rate,omitempty"`
	PayloadTypes  []recorder.PayloadType `json:"payload_types"`
	FirstOffsetMS uint32                 `json:"first_offset_ms"`
	Packets       uint64                 `json:"packets"`
	Bytes         uint64                 `json:"bytes"`
	RTCPPackets   uint64                 `json:"rtcp_packets"`
	SenderReports int                    `json:"sender_reports"`
	FileBytes     int64                  `json:"file_bytes"`
}

// Get returns a recording with its files and time line. For a running
// recording its size and counts are what it flushed so far.
func (s *Service) Get(ctx context.Context, id string) (Detail, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	r = s.current(r)
	d := Detail{Recording: view(r), Files: []File{}, Timeline: []recorder.Event{}}
	gs, err := s.o.Catalog.Segments(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	d.Segments = segmentViews(gs)
	dir := r.Dir
	for _, g := range gs { // the last segment this node wrote
		if g.Node == s.o.Node && s.inRoot(g.Dir) {
			dir = g.Dir
		}
	}
	s.mu.Lock()
	if l := s.live[id]; l != nil {
		dir = l.dir
		if l.ep != nil {
			e := l.endpoint()
			d.Endpoint = &e
		}
	}
	s.mu.Unlock()
	m, err := recorder.ReadManifest(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("read recording manifest", "recording", id, "err", err)
		}
		return d, nil
	}
	d.Timeline = append(d.Timeline, m.Events...)
	d.Dropped = m.Dropped
	for _, e := range m.Streams {
		f := File{File: e.File, SSRC: e.SSRC, Kind: e.Kind, Member: e.Member, Track: e.Track, RTCPOnly: e.RTCPOnly,
			PayloadTypes: []recorder.PayloadType{}}
		if fi, err := os.Stat(filepath.Join(dir, e.File)); err == nil {
			f.FileBytes = fi.Size()
		}
		if b, err := os.ReadFile(filepath.Join(dir, e.Sidecar)); err == nil {
			if sc, err := recorder.ParseSidecar(b); err == nil {
				f.ClockRate, f.FirstOffsetMS = sc.ClockRate, sc.FirstOffsetMS
				f.Packets, f.Bytes, f.RTCPPackets = sc.Packets, sc.Bytes, sc.RTCPPackets
				f.SenderReports = len(sc.SenderReports)
				if sc.PayloadTypes != nil {
					f.PayloadTypes = sc.PayloadTypes
				}
			} else {
				s.log.Warn("read recording sidecar", "recording", id, "file", e.Sidecar, "err", err)
			}
		}
		d.Files = append(d.Files, f)
	}
	if r.State == string(recorder.StateRecording) {
		d.Streams = len(d.Files)
	}
	return d, nil
}

// current adds a running recording's size and duration so far.
func (s *Service) current(r catalog.Recording) catalog.Recording {
	s.mu.Lock()
	l := s.live[r.ID]
	s.mu.Unlock()
	if l == nil {
		return r
	}
	r.SizeBytes = dirSize(l.dir)
	r.Duration = max(s.o.Now().Sub(r.StartedAt), 0)
	r.Streams = l.rec.Stats().Streams
	return r
}

// Filter selects recordings for List.
type Filter struct {
	Session string // "" for every session
	Query   string // a substring of the title or description
	Owner   string
	Limit   int
}

// List returns the recordings f selects, newest first.
func (s *Service) List(ctx context.Context, f Filter) ([]Recording, error) {
	if len(f.Query) > MaxTitle {
		return nil, fmt.Errorf("%w: query longer than %d bytes", ErrInvalid, MaxTitle)
	}
	rs, err := s.o.Catalog.ListRecordings(ctx, catalog.RecordingFilter{SessionID: f.Session, Query: f.Query,
		Owner: f.Owner, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]Recording, len(rs))
	for i, r := range rs {
		out[i] = view(s.current(r))
	}
	return out, nil
}

// Lookup returns a recording as stored (who owns it, which session).
func (s *Service) Lookup(ctx context.Context, id string) (Recording, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return Recording{}, err
	}
	return view(s.current(r)), nil
}

// Update sets a recording's title and description; nil leaves one as is.
func (s *Service) Update(ctx context.Context, id string, title, desc *string) (Recording, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return Recording{}, err
	}
	if title != nil {
		r.Title = *title
	}
	if desc != nil {
		r.Description = *desc
	}
	if err := checkText(r.Title, r.Description); err != nil {
		return Recording{}, err
	}
	if err := s.o.Catalog.UpdateRecordingText(ctx, id, r.Title, r.Description); err != nil {
		return Recording{}, err
	}
	s.mu.Lock()
	if l := s.live[id]; l != nil {
		l.cat.Title, l.cat.Description = r.Title, r.Description
	}
	s.mu.Unlock()
	return view(s.current(r)), nil
}

// Delete removes a recording and its files, stopping it first if it is
// running. A directory outside Root (a catalog entry of another node)
// is left alone and only the entry goes.
func (s *Service) Delete(ctx context.Context, id string) error {
	r, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	if _, err := s.Stop(ctx, id); err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	if s.inRoot(r.Dir) {
		if err := os.RemoveAll(r.Dir); err != nil {
			return fmt.Errorf("recording: delete %s: %w", id, err)
		}
	} else {
		s.log.Warn("recording directory not under the recordings root; only its catalog entry is deleted", "recording", id, "dir", r.Dir)
	}
	segs, err := s.o.Catalog.Segments(ctx, id)
	if err != nil {
		return err
	}
	for _, g := range segs[min(1, len(segs)):] { // the segments other nodes continued: those on this disk
		if g.Node == s.o.Node && s.inRoot(g.Dir) {
			if err := os.RemoveAll(g.Dir); err != nil {
				return fmt.Errorf("recording: delete %s: %w", id, err)
			}
		}
	}
	if err := s.o.Catalog.DeleteRecording(ctx, id); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	s.log.Info("recording deleted", "recording", id, "bytes", r.SizeBytes)
	return nil
}

// Dir returns the directory of a recording's files for reading them
// (export, playback). A recording still being written is ErrConflict; one
// whose catalog entry points outside the recordings directory, or whose
// directory is gone, is ErrNotFound.
func (s *Service) Dir(ctx context.Context, id string) (string, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return "", err
	}
	if r = s.current(r); r.State == string(recorder.StateRecording) {
		return "", fmt.Errorf("%w: recording %s is still being written", ErrConflict, id)
	}
	if !s.inRoot(r.Dir) {
		return "", fmt.Errorf("%w: %s has no files here", ErrNotFound, id)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, recorder.ManifestFile)); err != nil {
		return "", fmt.Errorf("%w: %s has no manifest", ErrNotFound, id)
	}
	return r.Dir, nil
}
