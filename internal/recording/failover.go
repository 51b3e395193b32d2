package recording

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/recorder"
)

// Failover (issue 16). In a cluster (Options.Node set) a running
// recording of a session belongs to the catalog, not to the process
// writing it: the recordings row names the node that writes it and its
// segment number. When that node dies, the session's owner continues the
// recording in a new segment on its own disk (Adopt), so what the dead
// node wrote stays where it is (its segment, repaired when that node
// starts again) and what follows is recorded here:
//
//	node A: r_x/       segment 1   recording ── A dies ──▶ interrupted
//	node B: r_x-2/     segment 2   (B owns the session)    recording ──▶ finished
//	catalog: recordings r_x: node A → B, segment 1 → 2 (one fenced UPDATE)
//
// The move is one transaction fenced by the session's owner lease and by
// the node and segment the owner read (catalog.MoveRecording), so of all
// the nodes that saw A die exactly one continues it. A node that was only
// cut off and still writes its segment learns at its next Fence that the
// recording moved on and stops: its segment ends there, the recording
// goes on elsewhere.

// Adopt continues on this node the running recordings of the session l
// is this node's owner lease of whose writer is gone: nobody (its node
// restarted and gave it up) or a node for which gone says it died. It
// returns how many it continued; the first error is returned after the
// others were tried. Without Options.Node it does nothing.
func (s *Service) Adopt(ctx context.Context, l catalog.Lease, gone func(node string) bool) (int, error) {
	if s.o.Node == "" {
		return 0, nil
	}
	recs, err := s.o.Catalog.ListRecordings(ctx, catalog.RecordingFilter{SessionID: l.SessionID,
		State: string(recorder.StateRecording)})
	if err != nil {
		return 0, err
	}
	n := 0
	var first error
	for _, r := range recs {
		if r.Node == s.o.Node || (r.Node != "" && !gone(r.Node)) {
			continue
		}
		switch err := s.continueHere(ctx, l, r); {
		case err == nil:
			n++
		case errors.Is(err, catalog.ErrMoved): // another node was quicker, or it ended
		case first == nil:
			first = fmt.Errorf("recording: continue %s: %w", r.ID, err)
		}
	}
	return n, first
}

// continueHere starts the next segment of r in this node's room of its
// session and moves the recording here in the catalog.
func (s *Service) continueHere(ctx context.Context, l catalog.Lease, r catalog.Recording) error {
	room := s.roomOf(r.SessionID)
	if room == nil {
		return fmt.Errorf("%w: session %s has no room on this node", ErrConflict, r.SessionID)
	}
	s.mu.Lock()
	_, busy := s.live[r.ID]
	if !busy {
		busy = s.moving[r.ID]
		s.moving[r.ID] = true
	}
	s.mu.Unlock()
	if busy {
		return catalog.ErrMoved
	}
	defer func() {
		s.mu.Lock()
		delete(s.moving, r.ID)
		s.mu.Unlock()
	}()
	need := Estimate(room.Tracks())
	if err := s.reserve(need, len(room.Tracks())); err != nil {
		return err
	}
	started := false
	defer func() {
		if !started {
			s.release(need)
		}
	}()
	from := r
	seq := max(r.Segment, 1) + 1
	dir := filepath.Join(s.o.Root, fmt.Sprintf("%s-%d", r.ID, seq))
	rec, err := recorder.Start(room, dir, s.o.Recorder)
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("recording: start: %w", err)
	}
	if s.o.Present != nil {
		for _, e := range s.o.Present(r.SessionID) {
			rec.Event(e)
		}
	}
	seg := catalog.Segment{Node: s.o.Node, Dir: dir, State: string(recorder.StateRecording), StartedAt: rec.Started().UTC()}
	if err := s.o.Catalog.MoveRecording(ctx, l, s.o.Now(), from, seg); err != nil {
		rec.Stop()
		os.RemoveAll(dir)
		return err
	}
	r.Node, r.Segment = s.o.Node, seq
	started = true // from here finish releases it
	if err := s.run(&running{rec: rec, cat: r, dir: dir, need: need, ended: make(chan struct{})}); err != nil {
		return err
	}
	s.publish(r.SessionID, event.RecordingMoved, Moved{Recording: view(r), From: from.Node, FromSegment: max(from.Segment, 1)})
	s.log.Warn("recording continued here", "recording", r.ID, "session", r.SessionID, "from", from.Node,
		"segment", seq, "dir", dir)
	return nil
}

// Moved is the data of a recording.moved event: the recording as it is
// now (its node and segment: this node's) and whence it came.
type Moved struct {
	Recording
	From        string `json:"from,omitempty"` // "" when its node had restarted and let it go
	FromSegment int    `json:"from_segment"`
}

// Fence stops the segments this node writes of recordings the catalog
// says moved on (another node continued them: this node was taken for
// dead) or deleted; their recorders stop and only their segments end.
// The node calls it every lease round. Without Options.Node it does
// nothing.
func (s *Service) Fence(ctx context.Context) {
	if s.o.Node == "" {
		return
	}
	s.mu.Lock()
	ls := make([]*running, 0, len(s.live))
	for _, l := range s.live {
		if l.cat.SessionID != "" {
			ls = append(ls, l)
		}
	}
	s.mu.Unlock()
	for _, l := range ls {
		r, err := s.o.Catalog.GetRecording(ctx, l.cat.ID)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
		case err != nil:
			continue // the catalog cannot tell; the session's lease decides about the room
		case r.Node == s.o.Node && max(r.Segment, 1) == max(l.cat.Segment, 1):
			if sess, err := s.o.Catalog.GetSession(ctx, r.SessionID); err == nil && sess.State != "activated" {
				// deactivated or ended through another node: its events
				// reach this node's log, not its SessionEnded
				s.log.Info("recording's session no longer active: stopping", "recording", r.ID, "session", r.SessionID)
				go l.stop()
			}
			continue
		}
		s.log.Warn("recording moved on: stopping this node's segment", "recording", l.cat.ID,
			"segment", l.cat.Segment, "now_on", r.Node, "now_segment", r.Segment)
		go l.stop()
	}
}

// EndStranded ends, as interrupted, the running recordings of sessions no
// longer active whose node is gone (or nobody's): nobody continues them,
// and their node will not stop them. It returns how many it ended. Any
// node may do it (an end is fenced by the node and segment it read, and
// the same end twice changes nothing). Without Options.Node it does
// nothing.
func (s *Service) EndStranded(ctx context.Context, gone func(node string) bool) (int, error) {
	if s.o.Node == "" {
		return 0, nil
	}
	recs, err := s.o.Catalog.StrandedRecordings(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Node == s.o.Node || (r.Node != "" && !gone(r.Node)) {
			continue
		}
		end := r
		end.State, end.EndedAt = string(recorder.StateInterrupted), s.o.Now().UTC()
		end.Duration, end.SizeBytes, end.Streams = max(end.EndedAt.Sub(r.StartedAt), 0), 0, 0
		end.Error = "its node stopped and the session is no longer active"
		if r.Node != "" {
			end.Error = fmt.Sprintf("its node %s died and the session is no longer active", r.Node)
		}
		switch err := s.o.Catalog.EndRecording(ctx, end); {
		case errors.Is(err, catalog.ErrMoved):
			continue
		case err != nil:
			return n, err
		}
		n++
		if stored, err := s.o.Catalog.GetRecording(ctx, r.ID); err == nil {
			end = stored
		}
		s.publish(r.SessionID, event.RecordingStopped, view(end))
		s.log.Warn("stranded recording ended", "recording", r.ID, "session", r.SessionID, "node", r.Node)
	}
	return n, nil
}

// reconcileSegments stores, at start-up in a cluster, what this node's
// segments a crash interrupted hold (after recorder.Repair): a recording
// of an active session it was still writing is let go (OrphanRecording),
// so the session's owner continues it at once; an ad-hoc one, or one of a
// session over or deactivated, ends interrupted; a segment another node
// already continued gets its size and streams.
func (s *Service) reconcileSegments(ctx context.Context) error {
	if s.o.Node == "" {
		return nil
	}
	segs, err := s.o.Catalog.NodeSegments(ctx, s.o.Node)
	if err != nil {
		return err
	}
	for _, g := range segs {
		if !s.inRoot(g.Dir) || (g.State != string(recorder.StateRecording) && g.SizeBytes > 0) {
			continue
		}
		r, err := s.o.Catalog.GetRecording(ctx, g.RecordingID)
		if errors.Is(err, catalog.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		end := s.ended(r, g.Dir, nil)
		if end.State == string(recorder.StateRecording) {
			end.State = string(recorder.StateInterrupted)
		}
		seg := g
		seg.State, seg.EndedAt, seg.SizeBytes, seg.Streams = end.State, end.EndedAt, end.SizeBytes, end.Streams
		current := r.State == string(recorder.StateRecording) && r.Node == s.o.Node && max(r.Segment, 1) == g.Seq
		goesOn := false // a recording of a session still active: its owner continues it
		if sess, err := s.o.Catalog.GetSession(ctx, r.SessionID); err == nil && sess.State == "activated" {
			goesOn = true
		}
		switch {
		case current && !goesOn:
			end.Segment = g.Seq
			err = s.o.Catalog.EndRecording(ctx, end)
		case current:
			if err = s.o.Catalog.EndSegment(ctx, seg); err == nil {
				err = s.o.Catalog.OrphanRecording(ctx, r)
			}
		default:
			err = s.o.Catalog.EndSegment(ctx, seg)
		}
		if err != nil && !errors.Is(err, catalog.ErrMoved) {
			return err
		}
		s.log.Info("recording segment marked "+seg.State, "recording", r.ID, "segment", g.Seq, "session", r.SessionID,
			"let_go", current && goesOn)
	}
	return nil
}
