package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JoinToken is an issued join token's record: how often it may still admit
// a member, and whether it was revoked.
type JoinToken struct {
	ID        string
	SessionID string
	Role      string
	MaxUses   int
	Uses      int
	Revoked   bool
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Errors of UseJoinToken.
var (
	ErrRevoked = errors.New("revoked")
	ErrUsedUp  = errors.New("used up")
)

// AddJoinToken records an issued token; ErrNotFound if its session does not
// exist.
func (s *Store) AddJoinToken(ctx context.Context, t JoinToken) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO join_tokens (id, session_id, role, max_uses, uses, revoked, created_at, expires_at)
VALUES (?, ?, ?, ?, 0, 0, ?, ?)`), t.ID, t.SessionID, t.Role, t.MaxUses, t.CreatedAt.UnixMilli(), t.ExpiresAt.UnixMilli())
	switch {
	case err != nil && isFKViolation(err):
		return fmt.Errorf("catalog: add join token: session %q: %w", t.SessionID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("catalog: add join token: %w", err)
	}
	return nil
}

// UseJoinToken counts one use of token id of session sid: ErrNotFound for
// a token it has no record of, ErrRevoked, or ErrUsedUp when it already
// admitted MaxUses members. The check and the count are one statement, so
// two joins cannot both take the last use.
func (s *Store) UseJoinToken(ctx context.Context, sid, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE join_tokens SET uses = uses + 1
WHERE id = ? AND session_id = ? AND revoked = 0 AND uses < max_uses`), id, sid)
	if err != nil {
		return fmt.Errorf("catalog: use join token: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	t, err := s.JoinToken(ctx, sid, id)
	switch {
	case err != nil:
		return err
	case t.Revoked:
		return fmt.Errorf("catalog: join token %q: %w", id, ErrRevoked)
	}
	return fmt.Errorf("catalog: join token %q: %w (%d of %d)", id, ErrUsedUp, t.Uses, t.MaxUses)
}

// JoinToken returns the record of token id of session sid; ErrNotFound if
// there is none.
func (s *Store) JoinToken(ctx context.Context, sid, id string) (JoinToken, error) {
	ts, err := s.listJoinTokens(ctx, "id = ? AND session_id = ?", id, sid)
	if err != nil {
		return JoinToken{}, err
	}
	if len(ts) == 0 {
		return JoinToken{}, fmt.Errorf("catalog: join token %q: %w", id, ErrNotFound)
	}
	return ts[0], nil
}

// JoinTokens lists the tokens issued for session sid, oldest first.
func (s *Store) JoinTokens(ctx context.Context, sid string) ([]JoinToken, error) {
	return s.listJoinTokens(ctx, "session_id = ?", sid)
}

func (s *Store) listJoinTokens(ctx context.Context, where string, args ...any) ([]JoinToken, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, session_id, role, max_uses, uses, revoked, created_at, expires_at
FROM join_tokens WHERE `+where+` ORDER BY created_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: join tokens: %w", err)
	}
	defer rows.Close()
	var out []JoinToken
	for rows.Next() {
		var t JoinToken
		var revoked int
		var created, expires int64
		if err := rows.Scan(&t.ID, &t.SessionID, &t.Role, &t.MaxUses, &t.Uses, &revoked, &created, &expires); err != nil {
			return nil, fmt.Errorf("catalog: join tokens: %w", err)
		}
		t.Revoked = revoked != 0
		t.CreatedAt, t.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeJoinToken revokes token id of session sid; ErrNotFound if there is
// no such token.
func (s *Store) RevokeJoinToken(ctx context.Context, sid, id string) error {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE join_tokens SET revoked = 1 WHERE id = ? AND session_id = ?"), id, sid)
	if err != nil {
		return fmt.Errorf("catalog: revoke join token: %w", err)
	}
	return affectedOne(res, "revoke join token", id)
}
