package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Kinds of media services (MediaService.Kind).
const (
	ServiceHLS       = "hls"
	ServiceComposite = "composite"
)

// MediaService is an HLS stream or a video composite started through the
// API (issue 16, failover): what was asked and the node running it, so
// that when that node dies the session's owner starts it again with the
// same request and moves the row to itself (MoveMediaService).
type MediaService struct {
	Kind string // ServiceHLS or ServiceComposite
	// ID is the composite's ID; an HLS stream's is its session's (one
	// stream a session).
	ID        string
	SessionID string
	// Request is what was asked, as JSON (hls.StartOptions,
	// composite.Request).
	Request string
	// Node runs it now; "" when nobody does (its node restarted).
	Node string
	// Member is the session member that publishes its picture (the
	// composite's, or an HLS stream's own composite's); "" for none.
	Member    string
	StartedBy string // "operator" or the chair's member ID
	StartedAt time.Time
}

const mediaServiceCols = "kind, id, session_id, request, node_id, member, started_by, started_at"

// PutMediaService records a service its node started; one of the same
// kind and ID started again (an HLS stream of the session, started anew)
// replaces the row. ErrNotFound for an unknown session.
func (s *Store) PutMediaService(ctx context.Context, m MediaService) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO media_services (`+mediaServiceCols+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (kind, id) DO UPDATE SET session_id = excluded.session_id, request = excluded.request,
    node_id = excluded.node_id, member = excluded.member, started_by = excluded.started_by,
    started_at = excluded.started_at`),
		m.Kind, m.ID, m.SessionID, m.Request, m.Node, m.Member, m.StartedBy, m.StartedAt.UnixMilli())
	switch {
	case err != nil && isFKViolation(err):
		return fmt.Errorf("catalog: put media service: session %q: %w", m.SessionID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("catalog: put media service: %w", err)
	}
	return nil
}

// RemoveMediaService forgets a service that node stopped (asked to); a
// row that moved on to another node meanwhile stays. Removing one that is
// not there is no error.
func (s *Store) RemoveMediaService(ctx context.Context, kind, id, node string) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM media_services WHERE kind = ? AND id = ? AND node_id = ?"),
		kind, id, node); err != nil {
		return fmt.Errorf("catalog: remove media service: %w", err)
	}
	return nil
}

// RemoveSessionMediaServices forgets every service of a session (it
// ended, or was deactivated).
func (s *Store) RemoveSessionMediaServices(ctx context.Context, sessionID string) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM media_services WHERE session_id = ?"), sessionID); err != nil {
		return fmt.Errorf("catalog: remove media services: %w", err)
	}
	return nil
}

// MediaServices returns a session's services, or every one for "", by
// kind and ID.
func (s *Store) MediaServices(ctx context.Context, sessionID string) ([]MediaService, error) {
	where, args := "", []any{}
	if sessionID != "" {
		where, args = " WHERE session_id = ?", append(args, sessionID)
	}
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+mediaServiceCols+" FROM media_services"+where+" ORDER BY kind, id"), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: media services: %w", err)
	}
	defer rows.Close()
	var out []MediaService
	for rows.Next() {
		var (
			m       MediaService
			started int64
		)
		if err := rows.Scan(&m.Kind, &m.ID, &m.SessionID, &m.Request, &m.Node, &m.Member, &m.StartedBy, &started); err != nil {
			return nil, fmt.Errorf("catalog: media services: %w", err)
		}
		m.StartedAt = time.UnixMilli(started).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: media services: %w", err)
	}
	return out, nil
}

// MoveMediaService makes node the one running a service that ran on
// from.Node (as the caller read it), with member now publishing its
// picture. It runs fenced by l, the session's owner lease (a service of a
// session moves only by its owner), and only if the row still names
// from.Node: so of all the nodes that saw its node die, exactly one
// starts it again. ErrFenced if l is not the session's current lease,
// ErrMoved if the service moved or was stopped meanwhile.
func (s *Store) MoveMediaService(ctx context.Context, l Lease, now time.Time, from MediaService, node, member string) error {
	return s.fenced(ctx, l, now, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE media_services SET node_id = ?, member = ?
WHERE kind = ? AND id = ? AND session_id = ? AND node_id = ?`), node, member, from.Kind, from.ID, l.SessionID, from.Node)
		if err != nil {
			return fmt.Errorf("catalog: move media service: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("catalog: move %s %q from %q: %w", from.Kind, from.ID, from.Node, ErrMoved)
		}
		return nil
	})
}

// OrphanMediaService says nobody runs a service any more (it stopped on
// m.Node without being asked to: its room went there), so that the
// session's owner starts it again; only if the row still names m.Node
// (else ErrMoved).
func (s *Store) OrphanMediaService(ctx context.Context, m MediaService) error {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE media_services SET node_id = '' WHERE kind = ? AND id = ? AND node_id = ?"),
		m.Kind, m.ID, m.Node)
	if err != nil {
		return fmt.Errorf("catalog: orphan media service: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("catalog: orphan %s %q of %q: %w", m.Kind, m.ID, m.Node, ErrMoved)
	}
	return nil
}

// OrphanMediaServices says nobody runs the services node ran (it has just
// started again after a crash and runs none), so that their sessions'
// owners start them again at once instead of waiting for the node to look
// dead. It returns how many there were.
func (s *Store) OrphanMediaServices(ctx context.Context, node string) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE media_services SET node_id = '' WHERE node_id = ?"), node)
	if err != nil {
		return 0, fmt.Errorf("catalog: orphan media services: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("catalog: orphan media services: %w", err)
	}
	return n, nil
}
