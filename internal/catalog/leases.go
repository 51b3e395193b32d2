package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrFenced reports that a write of a session's owner was refused: the
// writer's lease is no longer the session's current one (it expired, or
// another node took the session over with a higher epoch).
var ErrFenced = errors.New("catalog: not the session's owner (fenced)")

// Lease is a node's ownership of a session until Expires. Epoch is the
// fencing token: it goes up by one every time the session changes hands
// (or its owner restarts), and every owner write checks it.
type Lease struct {
	SessionID string
	Node      string
	Epoch     int64
	Expires   time.Time
}

// AcquireLease makes node the owner of a session until now+ttl if nobody
// holds it: no owner yet, the owner's lease expired before now, or the
// owner is node itself (a restarted node takes its sessions back; its
// old incarnation's writes are fenced by the new epoch). It returns the
// new lease and true, or false when another node holds the session.
// One statement, so two nodes racing for a session cannot both win.
func (s *Store) AcquireLease(ctx context.Context, sessionID, node string, now time.Time, ttl time.Duration) (Lease, bool, error) {
	exp := now.Add(ttl)
	var epoch int64
	err := s.db.QueryRowContext(ctx, s.q(`INSERT INTO session_owners (session_id, node_id, epoch, expires_at)
VALUES (?, ?, 1, ?)
ON CONFLICT (session_id) DO UPDATE SET node_id = excluded.node_id, epoch = session_owners.epoch + 1,
    expires_at = excluded.expires_at
WHERE session_owners.expires_at < ? OR session_owners.node_id = excluded.node_id
RETURNING epoch`), sessionID, node, exp.UnixMilli(), now.UnixMilli()).Scan(&epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Lease{}, false, nil
	case err != nil && isFKViolation(err):
		return Lease{}, false, fmt.Errorf("catalog: acquire lease: session %q: %w", sessionID, ErrNotFound)
	case err != nil:
		return Lease{}, false, fmt.Errorf("catalog: acquire lease: %w", err)
	}
	return Lease{SessionID: sessionID, Node: node, Epoch: epoch, Expires: exp.Truncate(time.Millisecond)}, true, nil
}

// RenewLease extends l to now+ttl if it is still the session's current,
// unexpired lease; otherwise it returns ErrFenced.
func (s *Store) RenewLease(ctx context.Context, l Lease, now time.Time, ttl time.Duration) (Lease, error) {
	exp := now.Add(ttl)
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE session_owners SET expires_at = ?
WHERE session_id = ? AND node_id = ? AND epoch = ? AND expires_at >= ?`),
		exp.UnixMilli(), l.SessionID, l.Node, l.Epoch, now.UnixMilli())
	if err != nil {
		return l, fmt.Errorf("catalog: renew lease: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return l, fmt.Errorf("catalog: renew lease of %s (epoch %d): %w", l.SessionID, l.Epoch, ErrFenced)
	}
	l.Expires = exp.Truncate(time.Millisecond)
	return l, nil
}

// ReleaseLease gives a session up (a draining node), so another node may
// take it at once; a lease that is no longer current is left alone.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE session_owners SET expires_at = 0
WHERE session_id = ? AND node_id = ? AND epoch = ?`), l.SessionID, l.Node, l.Epoch)
	if err != nil {
		return fmt.Errorf("catalog: release lease: %w", err)
	}
	return nil
}

// Owner returns the session's current owner lease (expired or not), or
// ErrNotFound when no node ever owned it.
func (s *Store) Owner(ctx context.Context, sessionID string) (Lease, error) {
	l := Lease{SessionID: sessionID}
	var exp int64
	err := s.db.QueryRowContext(ctx, s.q("SELECT node_id, epoch, expires_at FROM session_owners WHERE session_id = ?"),
		sessionID).Scan(&l.Node, &l.Epoch, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("catalog: owner of %q: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("catalog: owner: %w", err)
	}
	l.Expires = time.UnixMilli(exp).UTC()
	return l, nil
}

// Unowned returns the sessions not over (created, activated, deactivated)
// whose lease expired before now or that have none: those a node may take.
func (s *Store) Unowned(ctx context.Context, now time.Time) ([]string, error) {
	return s.column(ctx, "unowned sessions", `SELECT s.id FROM sessions s
LEFT JOIN session_owners o ON o.session_id = s.id
WHERE s.state IN ('created', 'activated', 'deactivated') AND (o.session_id IS NULL OR o.expires_at < ?)
ORDER BY s.id`, now.UnixMilli())
}

// column runs a query of one text column and returns its values; what
// names the query in errors.
func (s *Store) column(ctx context.Context, what, query string, args ...any) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", what, err)
	}
	return out, nil
}

// fenced runs write in a transaction that first checks l is the session's
// current, unexpired lease at now; it returns ErrFenced if not. The check
// is an UPDATE of the lease's row, so a takeover (which updates the same
// row) waits for this transaction on PostgreSQL, and SQLite runs one
// writer at a time: no owner write commits after a takeover it did not see.
func (s *Store) fenced(ctx context.Context, l Lease, now time.Time, write func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	res, err := tx.ExecContext(ctx, s.q(`UPDATE session_owners SET expires_at = expires_at
WHERE session_id = ? AND node_id = ? AND epoch = ? AND expires_at >= ?`), l.SessionID, l.Node, l.Epoch, now.UnixMilli())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("session %s, epoch %d: %w", l.SessionID, l.Epoch, ErrFenced)
	}
	if err := write(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// SetLinkNode records the node a link's media runs on (again, when it
// moves to another node).
func (s *Store) SetLinkNode(ctx context.Context, linkID, node string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO link_nodes (link_id, node_id) VALUES (?, ?)
ON CONFLICT (link_id) DO UPDATE SET node_id = excluded.node_id`), linkID, node); err != nil {
		return fmt.Errorf("catalog: set link node: %w", err)
	}
	return nil
}

// LinkNode returns the node a link's media runs on, "" if none was recorded
// (links made before ownership: the session's owner restores them).
func (s *Store) LinkNode(ctx context.Context, linkID string) (string, error) {
	var node string
	err := s.db.QueryRowContext(ctx, s.q("SELECT node_id FROM link_nodes WHERE link_id = ?"), linkID).Scan(&node)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("catalog: link node: %w", err)
	}
	return node, nil
}

// LinkNodes returns the nodes the session's stored links run on, in order
// (links stored without a node are not counted).
func (s *Store) LinkNodes(ctx context.Context, sessionID string) ([]string, error) {
	return s.column(ctx, "link nodes", `SELECT DISTINCT n.node_id FROM link_nodes n
JOIN links l ON l.id = n.link_id WHERE l.session_id = ? ORDER BY n.node_id`, sessionID)
}

// NodeLinks returns the IDs of the links stored as running on node.
func (s *Store) NodeLinks(ctx context.Context, node string) ([]string, error) {
	return s.column(ctx, "node links", "SELECT link_id FROM link_nodes WHERE node_id = ? ORDER BY link_id", node)
}
