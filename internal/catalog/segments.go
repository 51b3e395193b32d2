package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrMoved reports that a recording (or a media service) is no longer
// run where the caller thought: another node took it over
// (MoveRecording, MoveMediaService), or it ended.
var ErrMoved = errors.New("catalog: moved on")

// Segment is one node's part of a recording (issue 16, failover): a
// recording starts with segment 1 and gets one more each time a survivor
// continues it after its node died. Each segment has its own directory on
// its node's disk, its own time line from StartedAt.
type Segment struct {
	RecordingID string
	Seq         int
	Node        string
	Dir         string
	// State is "recording" while written, then "finished", "failed" or
	// "interrupted" (its node died, or it was handed over).
	State     string
	StartedAt time.Time
	EndedAt   time.Time // zero while recording
	SizeBytes int64
	Streams   int
}

const segmentCols = "recording_id, seq, node_id, dir, state, started_at, ended_at, size_bytes, streams"

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) insertSegment(ctx context.Context, db execer, g Segment) error {
	_, err := db.ExecContext(ctx, s.q(`INSERT INTO recording_segments (`+segmentCols+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), g.RecordingID, g.Seq, g.Node, g.Dir, g.State, g.StartedAt.UnixMilli(),
		toMillis(g.EndedAt), g.SizeBytes, g.Streams)
	return err
}

// Segments returns a recording's segments in order (none for an unknown
// recording).
func (s *Store) Segments(ctx context.Context, recordingID string) ([]Segment, error) {
	return s.segments(ctx, "recording_id = ?", recordingID)
}

// NodeSegments returns the segments node wrote that are not known to have
// ended cleanly (state recording or interrupted), for the node to repair
// and store at its start.
func (s *Store) NodeSegments(ctx context.Context, node string) ([]Segment, error) {
	return s.segments(ctx, "node_id = ? AND state IN ('recording', 'interrupted')", node)
}

func (s *Store) segments(ctx context.Context, where string, args ...any) ([]Segment, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+segmentCols+" FROM recording_segments WHERE "+where+
		" ORDER BY recording_id, seq"), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: segments: %w", err)
	}
	defer rows.Close()
	out := []Segment{}
	for rows.Next() {
		var (
			g       Segment
			started int64
			ended   sql.NullInt64
		)
		if err := rows.Scan(&g.RecordingID, &g.Seq, &g.Node, &g.Dir, &g.State, &started, &ended, &g.SizeBytes,
			&g.Streams); err != nil {
			return nil, fmt.Errorf("catalog: segments: %w", err)
		}
		g.StartedAt, g.EndedAt = time.UnixMilli(started).UTC(), fromMillis(ended)
		out = append(out, g)
	}
	return out, rows.Err()
}

// EndSegment stores how one segment ended (its state, end, size and
// streams) without touching its recording: a node's repair at start-up of
// a segment that another node continued.
func (s *Store) EndSegment(ctx context.Context, g Segment) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE recording_segments SET state = ?, ended_at = ?, size_bytes = ?, streams = ?
WHERE recording_id = ? AND seq = ?`), g.State, toMillis(g.EndedAt), g.SizeBytes, g.Streams, g.RecordingID, g.Seq)
	if err != nil {
		return fmt.Errorf("catalog: end segment: %w", err)
	}
	return affectedOne(res, "end segment", g.RecordingID)
}

// MoveRecording makes next the current segment of a running recording
// whose current one is from (its node and segment as the caller read
// them): the old segment is marked interrupted at next's start, the
// recording's node and segment become next's, next is inserted. It runs
// fenced by l, the session's owner lease (a recording of a session moves
// only by its owner), and only if the recording is still running in
// from: so of all the nodes that saw a recording's node die, exactly one
// continues it. ErrFenced if l is not the session's current lease,
// ErrMoved if the recording moved or ended meanwhile.
func (s *Store) MoveRecording(ctx context.Context, l Lease, now time.Time, from Recording, next Segment) error {
	if from.Segment == 0 {
		from.Segment = 1
	}
	next.RecordingID, next.Seq = from.ID, from.Segment+1
	return s.fenced(ctx, l, now, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE recordings SET node_id = ?, segment = ?
WHERE id = ? AND session_id = ? AND node_id = ? AND segment = ? AND state = 'recording'`),
			next.Node, next.Seq, from.ID, l.SessionID, from.Node, from.Segment)
		if err != nil {
			return fmt.Errorf("catalog: move recording: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("catalog: move recording %q from segment %d of %q: %w", from.ID, from.Segment, from.Node, ErrMoved)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE recording_segments SET state = 'interrupted', ended_at = ?
WHERE recording_id = ? AND seq = ? AND state = 'recording'`), next.StartedAt.UnixMilli(), from.ID, from.Segment); err != nil {
			return fmt.Errorf("catalog: move recording: %w", err)
		}
		if err := s.insertSegment(ctx, tx, next); err != nil {
			return fmt.Errorf("catalog: move recording: %w", err)
		}
		return nil
	})
}

// OrphanRecording says nobody writes a running recording any more (its
// node restarted after a crash and ended its segment), so that the
// session's owner continues it at once instead of waiting for the node to
// look dead; only if r.Node still writes r.Segment (else ErrMoved).
func (s *Store) OrphanRecording(ctx context.Context, r Recording) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE recordings SET node_id = ''
WHERE id = ? AND node_id = ? AND segment = ? AND state = 'recording'`), r.ID, r.Node, r.Segment)
	if err != nil {
		return fmt.Errorf("catalog: orphan recording: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("catalog: orphan recording %q: %w", r.ID, ErrMoved)
	}
	return nil
}

// ServiceNodes returns the nodes that run something of an activated
// session — a stored link, a running recording ("" for one nobody
// writes), an HLS stream or composite started through the API ("" for
// one nobody runs), or a phone's call — so that a round of failover can
// tell in one query whether any of them is gone.
func (s *Store) ServiceNodes(ctx context.Context) ([]string, error) {
	return s.column(ctx, "service nodes", `SELECT n.node_id FROM link_nodes n
JOIN links l ON l.id = n.link_id JOIN sessions s ON s.id = l.session_id WHERE s.state = 'activated'
UNION SELECT r.node_id FROM recordings r JOIN sessions s ON s.id = r.session_id
WHERE r.state = 'recording' AND s.state = 'activated'
UNION SELECT c.node_id FROM sip_calls c JOIN sessions s ON s.id = c.session_id WHERE s.state = 'activated'
UNION SELECT m.node_id FROM media_services m JOIN sessions s ON s.id = m.session_id WHERE s.state = 'activated'`)
}

// StrandedRecordings returns the recordings still running of sessions
// that are no longer active (deactivated, over, or deleted): their node
// stops them when it hears of it, unless it is dead.
func (s *Store) StrandedRecordings(ctx context.Context) ([]Recording, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+prefixed("r.", recordingCols)+` FROM recordings r
LEFT JOIN sessions s ON s.id = r.session_id
WHERE r.state = 'recording' AND r.session_id <> '' AND (s.id IS NULL OR s.state <> 'activated')
ORDER BY r.id`))
	if err != nil {
		return nil, fmt.Errorf("catalog: stranded recordings: %w", err)
	}
	defer rows.Close()
	var out []Recording
	for rows.Next() {
		r, err := scanRecording(rows)
		if err != nil {
			return nil, fmt.Errorf("catalog: stranded recordings: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// prefixed puts p before every column of a comma-separated list.
func prefixed(p, cols string) string {
	out := ""
	for i, c := range strings.Split(cols, ", ") {
		if i > 0 {
			out += ", "
		}
		out += p + c
	}
	return out
}
