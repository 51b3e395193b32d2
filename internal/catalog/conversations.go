package catalog

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// ConversationMember is a member's number in its session's conversation.
type ConversationMember struct {
	MemberID string
	N        uint32
	Name     string
}

// StoredMessage is one message of a conversation as the node accepted it.
type StoredMessage struct {
	Sender     uint32
	Seq        uint64
	Flow       uint32
	SentAt     time.Time
	ReceivedAt time.Time
	Body       []byte // the whole wire message
}

// ConversationMemberN returns member's number in the session's
// conversation, giving it the next free one (from 1) the first time
// (created is then true).
func (s *Store) ConversationMemberN(ctx context.Context, sessionID, memberID, name string) (n uint32, created bool, err error) {
	for range 5 { // another node may take the same number at once
		err := s.db.QueryRowContext(ctx, s.q("SELECT n FROM conversation_members WHERE session_id = ? AND member_id = ?"),
			sessionID, memberID).Scan(&n)
		if err == nil {
			return n, created, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, fmt.Errorf("catalog: conversation member: %w", err)
		}
		_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO conversation_members (session_id, member_id, n, name)
SELECT ?, ?, COALESCE(MAX(n), 0) + 1, ? FROM conversation_members WHERE session_id = ?`), sessionID, memberID, name, sessionID)
		switch {
		case err == nil:
			created = true
		case isUniqueViolation(err):
			continue
		case isFKViolation(err):
			return 0, false, fmt.Errorf("catalog: conversation member: session %q: %w", sessionID, ErrNotFound)
		default:
			return 0, false, fmt.Errorf("catalog: conversation member: %w", err)
		}
	}
	err = s.db.QueryRowContext(ctx, s.q("SELECT n FROM conversation_members WHERE session_id = ? AND member_id = ?"),
		sessionID, memberID).Scan(&n)
	if err != nil {
		return 0, false, fmt.Errorf("catalog: conversation member: %w", err)
	}
	return n, created, nil
}

// ConversationMembers lists the numbered members of a session's
// conversation by number.
func (s *Store) ConversationMembers(ctx context.Context, sessionID string) ([]ConversationMember, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT member_id, n, name FROM conversation_members WHERE session_id = ? ORDER BY n"), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: conversation members: %w", err)
	}
	defer rows.Close()
	var out []ConversationMember
	for rows.Next() {
		var m ConversationMember
		if err := rows.Scan(&m.MemberID, &m.N, &m.Name); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// AddMessage stores a message; ErrExists if its sender and sequence number
// are taken (a duplicate).
func (s *Store) AddMessage(ctx context.Context, sessionID string, m StoredMessage) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO conversation_messages (session_id, sender, seq, flow, sent_at, received_at, body)
VALUES (?, ?, ?, ?, ?, ?, ?)`), sessionID, m.Sender, int64(m.Seq), m.Flow, m.SentAt.UnixMilli(), m.ReceivedAt.UnixMilli(),
		encodeBody(m.Body))
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("catalog: message %d/%d: %w", m.Sender, m.Seq, ErrExists)
	case isFKViolation(err):
		return fmt.Errorf("catalog: message: session %q: %w", sessionID, ErrNotFound)
	}
	return fmt.Errorf("catalog: add message: %w", err)
}

// Messages returns the session's last limit messages in the order they
// were received.
func (s *Store) Messages(ctx context.Context, sessionID string, limit int) ([]StoredMessage, error) {
	return s.MessagesExcept(ctx, sessionID, limit, 0)
}

// MessagesExcept is Messages leaving out the messages of flow skip (0
// leaves out none; flows are numbered from 1).
func (s *Store) MessagesExcept(ctx context.Context, sessionID string, limit int, skip uint32) ([]StoredMessage, error) {
	return s.messages(ctx, `SELECT sender, seq, flow, sent_at, received_at, body FROM (
SELECT sender, seq, flow, sent_at, received_at, body FROM conversation_messages WHERE session_id = ? AND flow <> ?
ORDER BY received_at DESC, sender DESC, seq DESC LIMIT ?) last ORDER BY received_at, sender, seq`, sessionID, skip, limit)
}

// NewestOf returns each sender's newest message of a flow (by sequence
// number), in the order they were received.
func (s *Store) NewestOf(ctx context.Context, sessionID string, flow uint32) ([]StoredMessage, error) {
	return s.messages(ctx, `SELECT sender, seq, flow, sent_at, received_at, body FROM conversation_messages
WHERE session_id = ? AND (sender, seq) IN (SELECT sender, MAX(seq) FROM conversation_messages
WHERE session_id = ? AND flow = ? GROUP BY sender)
ORDER BY received_at, sender, seq`, sessionID, sessionID, flow)
}

func (s *Store) messages(ctx context.Context, query string, args ...any) ([]StoredMessage, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: messages: %w", err)
	}
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		var m StoredMessage
		var seq, sent, recv int64
		var body string
		if err := rows.Scan(&m.Sender, &seq, &m.Flow, &sent, &recv, &body); err != nil {
			return nil, err
		}
		b, err := decodeBody(body)
		if err != nil {
			return nil, fmt.Errorf("catalog: message %d/%d: %w", m.Sender, seq, err)
		}
		m.Seq, m.SentAt, m.ReceivedAt, m.Body = uint64(seq), time.UnixMilli(sent).UTC(), time.UnixMilli(recv).UTC(), b
		out = append(out, m)
	}
	return out, rows.Err()
}

// LastSeqs gives each sender's highest stored sequence number.
func (s *Store) LastSeqs(ctx context.Context, sessionID string) (map[uint32]uint64, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT sender, MAX(seq) FROM conversation_messages WHERE session_id = ? GROUP BY sender"), sessionID)
	if err != nil {
		return nil, fmt.Errorf("catalog: last seqs: %w", err)
	}
	defer rows.Close()
	out := map[uint32]uint64{}
	for rows.Next() {
		var n uint32
		var seq int64
		if err := rows.Scan(&n, &seq); err != nil {
			return nil, err
		}
		out[n] = uint64(seq)
	}
	return out, rows.Err()
}

// Bodies are stored as base64 text: one column type on SQLite and
// PostgreSQL alike.
func encodeBody(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeBody(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
