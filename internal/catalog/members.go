package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Member is a participant of a session with a role ("chair",
// "participant", "listener", validated by the caller).
type Member struct {
	ID        string
	SessionID string
	Name      string
	Role      string
	Subgroup  string // "" = the main session
	JoinedAt  time.Time
}

// Subgroup is a private group inside a session.
type Subgroup struct {
	ID        string
	SessionID string
	Name      string
	CreatedBy string
	CreatedAt time.Time
}

// AddMember inserts m; ErrNotFound if its session does not exist.
func (s *Store) AddMember(ctx context.Context, m Member) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO members (id, session_id, name, role, subgroup, joined_at)
VALUES (?, ?, ?, ?, ?, ?)`), m.ID, m.SessionID, m.Name, m.Role, m.Subgroup, m.JoinedAt.UnixMilli())
	switch {
	case err != nil && isFKViolation(err):
		return fmt.Errorf("catalog: add member: session %q: %w", m.SessionID, ErrNotFound)
	case err != nil && isUniqueViolation(err):
		return fmt.Errorf("catalog: add member %q: %w", m.ID, ErrExists)
	case err != nil:
		return fmt.Errorf("catalog: add member: %w", err)
	}
	return nil
}

// RemoveMember deletes a member (and, by cascade, its member_links rows).
func (s *Store) RemoveMember(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q("DELETE FROM members WHERE id = ?"), id)
	if err != nil {
		return fmt.Errorf("catalog: remove member: %w", err)
	}
	return affectedOne(res, "remove member", id)
}

// SetMemberSubgroup moves a member to subgroup ("" = main session).
func (s *Store) SetMemberSubgroup(ctx context.Context, id, subgroup string) error {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE members SET subgroup = ? WHERE id = ?"), subgroup, id)
	if err != nil {
		return fmt.Errorf("catalog: set member subgroup: %w", err)
	}
	return affectedOne(res, "set member subgroup", id)
}

// ListMembers returns a session's members in joining order.
func (s *Store) ListMembers(ctx context.Context, sessionID string) ([]Member, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, session_id, name, role, subgroup, joined_at
FROM members WHERE session_id = ? ORDER BY joined_at, id`), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: list members: %w", err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		var at int64
		if err := rows.Scan(&m.ID, &m.SessionID, &m.Name, &m.Role, &m.Subgroup, &at); err != nil {
			return nil, fmt.Errorf("catalog: list members: %w", err)
		}
		m.JoinedAt = time.UnixMilli(at).UTC()
		out = append(out, m)
	}
	return out, rows.Err()
}

// AddSubgroup inserts g; ErrNotFound if its session does not exist.
func (s *Store) AddSubgroup(ctx context.Context, g Subgroup) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO subgroups (id, session_id, name, created_by, created_at)
VALUES (?, ?, ?, ?, ?)`), g.ID, g.SessionID, g.Name, g.CreatedBy, g.CreatedAt.UnixMilli())
	switch {
	case err != nil && isFKViolation(err):
		return fmt.Errorf("catalog: add subgroup: session %q: %w", g.SessionID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("catalog: add subgroup: %w", err)
	}
	return nil
}

// RemoveSubgroup deletes a subgroup and moves its members to the main
// session, in one transaction.
func (s *Store) RemoveSubgroup(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: remove subgroup: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	res, err := tx.ExecContext(ctx, s.q("DELETE FROM subgroups WHERE id = ?"), id)
	if err != nil {
		return fmt.Errorf("catalog: remove subgroup: %w", err)
	}
	if err := affectedOne(res, "remove subgroup", id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q("UPDATE members SET subgroup = '' WHERE subgroup = ?"), id); err != nil {
		return fmt.Errorf("catalog: remove subgroup: %w", err)
	}
	return tx.Commit()
}

// ListSubgroups returns a session's subgroups in creation order.
func (s *Store) ListSubgroups(ctx context.Context, sessionID string) ([]Subgroup, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, session_id, name, created_by, created_at
FROM subgroups WHERE session_id = ? ORDER BY created_at, id`), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: list subgroups: %w", err)
	}
	defer rows.Close()
	var out []Subgroup
	for rows.Next() {
		var g Subgroup
		var at int64
		if err := rows.Scan(&g.ID, &g.SessionID, &g.Name, &g.CreatedBy, &at); err != nil {
			return nil, fmt.Errorf("catalog: list subgroups: %w", err)
		}
		g.CreatedAt = time.UnixMilli(at).UTC()
		out = append(out, g)
	}
	return out, rows.Err()
}

// SetLinkMember records that link belongs to member.
func (s *Store) SetLinkMember(ctx context.Context, linkID, memberID string) error {
	_, err := s.db.ExecContext(ctx, s.q("INSERT INTO member_links (link_id, member_id) VALUES (?, ?)"), linkID, memberID)
	if err != nil {
		return fmt.Errorf("catalog: set link member: %w", err)
	}
	return nil
}

// LinkMember returns the member a link belongs to, or "" for none.
func (s *Store) LinkMember(ctx context.Context, linkID string) (string, error) {
	var m string
	err := s.db.QueryRowContext(ctx, s.q("SELECT member_id FROM member_links WHERE link_id = ?"), linkID).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("catalog: link member: %w", err)
	}
	return m, nil
}
