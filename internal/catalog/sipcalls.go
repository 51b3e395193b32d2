package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SIPCall is a phone's call into a session, as the node that serves it
// stored it for another to take over (issue 16, failover).
type SIPCall struct {
	CallID    string
	SessionID string
	Member    string // the phone's member
	Node      string // the node serving the call
	// Dialog is what a node needs to re-INVITE the phone (sip.Dialog as
	// JSON); the catalog does not read it.
	Dialog    []byte
	UpdatedAt time.Time
}

// MaxSIPDialog bounds a stored dialog (bytes): a call whose dialog is
// larger is not stored, and cannot be taken over.
const MaxSIPDialog = 16 << 10

const sipCallCols = "call_id, session_id, member_id, node_id, dialog, updated_at"

// PutSIPCall stores c, or replaces the call with its Call-ID. A zero
// UpdatedAt is set to the current time.
func (s *Store) PutSIPCall(ctx context.Context, c SIPCall) error {
	if c.CallID == "" || c.SessionID == "" {
		return errors.New("catalog: put sip call: empty call or session id")
	}
	if len(c.Dialog) > MaxSIPDialog {
		return fmt.Errorf("catalog: put sip call: dialog of %d bytes, more than %d", len(c.Dialog), MaxSIPDialog)
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = time.Now()
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO sip_calls (`+sipCallCols+`) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (call_id) DO UPDATE SET session_id = excluded.session_id, member_id = excluded.member_id,
node_id = excluded.node_id, dialog = excluded.dialog, updated_at = excluded.updated_at`),
		c.CallID, c.SessionID, c.Member, c.Node, string(c.Dialog), c.UpdatedAt.UnixMilli())
	if err != nil {
		if isFKViolation(err) {
			return fmt.Errorf("catalog: put sip call: session %q: %w", c.SessionID, ErrNotFound)
		}
		return fmt.Errorf("catalog: put sip call: %w", err)
	}
	return nil
}

// SIPCalls returns a session's stored calls, by Call-ID.
func (s *Store) SIPCalls(ctx context.Context, sessionID string) ([]SIPCall, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+sipCallCols+" FROM sip_calls WHERE session_id = ? ORDER BY call_id"), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: sip calls: %w", err)
	}
	defer rows.Close()
	out := []SIPCall{}
	for rows.Next() {
		var (
			c       SIPCall
			dialog  string
			updated int64
		)
		if err := rows.Scan(&c.CallID, &c.SessionID, &c.Member, &c.Node, &dialog, &updated); err != nil {
			return nil, fmt.Errorf("catalog: sip calls: %w", err)
		}
		c.Dialog, c.UpdatedAt = []byte(dialog), time.UnixMilli(updated).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// MoveSIPCall makes node to serve a call that from served: fenced by l,
// the session's owner lease (only the owner takes calls over), and only if
// from still serves it, so of the nodes that saw from die exactly one
// takes the call. ErrFenced if l is not the session's current lease,
// ErrMoved if the call moved on or ended meanwhile.
func (s *Store) MoveSIPCall(ctx context.Context, l Lease, now time.Time, callID, from, to string) error {
	return s.fenced(ctx, l, now, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sip_calls SET node_id = ?, updated_at = ?
WHERE call_id = ? AND session_id = ? AND node_id = ?`), to, now.UnixMilli(), callID, l.SessionID, from)
		if err != nil {
			return fmt.Errorf("catalog: move sip call: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("catalog: move sip call %q from %q: %w", callID, from, ErrMoved)
		}
		return nil
	})
}

// DeleteSIPCall forgets a call (it ended); none is not an error.
func (s *Store) DeleteSIPCall(ctx context.Context, callID string) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM sip_calls WHERE call_id = ?"), callID); err != nil {
		return fmt.Errorf("catalog: delete sip call: %w", err)
	}
	return nil
}

// NodeSIPCalls returns the Call-IDs of the calls node serves.
func (s *Store) NodeSIPCalls(ctx context.Context, node string) ([]string, error) {
	return s.column(ctx, "node sip calls", "SELECT call_id FROM sip_calls WHERE node_id = ? ORDER BY call_id", node)
}
