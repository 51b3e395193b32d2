package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SetSessionPIN stores the digests of a session's guest PIN, replacing
// any earlier one; ErrNotFound if the session does not exist.
func (s *Store) SetSessionPIN(ctx context.Context, sessionID, ha1MD5, ha1SHA256 string) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO session_pins (session_id, ha1_md5, ha1_sha256) VALUES (?, ?, ?)
ON CONFLICT (session_id) DO UPDATE SET ha1_md5 = excluded.ha1_md5, ha1_sha256 = excluded.ha1_sha256`),
		sessionID, ha1MD5, ha1SHA256)
	if err != nil && isFKViolation(err) {
		return fmt.Errorf("catalog: set session pin: session %q: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("catalog: set session pin: %w", err)
	}
	return nil
}

// SessionPIN returns the digests of a session's guest PIN; found is false
// when it has none.
func (s *Store) SessionPIN(ctx context.Context, sessionID string) (ha1MD5, ha1SHA256 string, found bool, err error) {
	err = s.db.QueryRowContext(ctx, s.q("SELECT ha1_md5, ha1_sha256 FROM session_pins WHERE session_id = ?"), sessionID).
		Scan(&ha1MD5, &ha1SHA256)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("catalog: session pin: %w", err)
	}
	return ha1MD5, ha1SHA256, true, nil
}

// DeleteSessionPIN removes a session's guest PIN (none is no error).
func (s *Store) DeleteSessionPIN(ctx context.Context, sessionID string) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM session_pins WHERE session_id = ?"), sessionID); err != nil {
		return fmt.Errorf("catalog: delete session pin: %w", err)
	}
	return nil
}
