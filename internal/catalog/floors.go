package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SetLinkPoliced marks a link as created by a member: the destination
// policy and the consent rule apply to it, also after a restart.
func (s *Store) SetLinkPoliced(ctx context.Context, linkID string) error {
	_, err := s.db.ExecContext(ctx, s.q("INSERT INTO policed_links (link_id) VALUES (?)"), linkID)
	if err != nil {
		return fmt.Errorf("catalog: set link policed: %w", err)
	}
	return nil
}

// LinkPoliced reports whether a link was created by a member.
func (s *Store) LinkPoliced(ctx context.Context, linkID string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.q("SELECT 1 FROM policed_links WHERE link_id = ?"), linkID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("catalog: link policed: %w", err)
	}
	return true, nil
}

// SaveFloorState stores one floor's state of a session (an opaque
// document, JSON from the floor package), replacing what was there.
func (s *Store) SaveFloorState(ctx context.Context, sessionID, floor string, state []byte) error {
	_, err := s.db.ExecContext(ctx, s.q(saveFloorSQL), sessionID, floor, string(state), time.Now().UnixMilli())
	return floorErr(err, sessionID)
}

// SaveFloorStateFenced is SaveFloorState by the session's owner: it is
// refused with ErrFenced unless l is still the session's current lease at
// now, so a node that lost the session (partitioned, taken over) never
// overwrites the new owner's floors.
func (s *Store) SaveFloorStateFenced(ctx context.Context, l Lease, now time.Time, floor string, state []byte) error {
	err := s.fenced(ctx, l, now, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(saveFloorSQL), l.SessionID, floor, string(state), now.UnixMilli())
		return err
	})
	if errors.Is(err, ErrFenced) {
		return fmt.Errorf("catalog: save floor state: %w", err)
	}
	return floorErr(err, l.SessionID)
}

const saveFloorSQL = `INSERT INTO floor_states (session_id, floor, state, updated_at)
VALUES (?, ?, ?, ?)
ON CONFLICT (session_id, floor) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`

func floorErr(err error, sessionID string) error {
	switch {
	case err == nil:
		return nil
	case isFKViolation(err):
		return fmt.Errorf("catalog: save floor state: session %q: %w", sessionID, ErrNotFound)
	}
	return fmt.Errorf("catalog: save floor state: %w", err)
}

// FloorStates returns the stored floor states of a session by floor name.
func (s *Store) FloorStates(ctx context.Context, sessionID string) (map[string][]byte, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT floor, state FROM floor_states WHERE session_id = ?"), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: floor states: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var f, st string
		if err := rows.Scan(&f, &st); err != nil {
			return nil, fmt.Errorf("catalog: floor states: %w", err)
		}
		out[f] = []byte(st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: floor states: %w", err)
	}
	return out, nil
}
