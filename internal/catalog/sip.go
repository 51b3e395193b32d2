package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SIPUser is a SIP account. Only digests of the password are kept: HA1 =
// H(username ":" realm ":" password), hex, for MD5 and SHA-256.
type SIPUser struct {
	Username  string
	Realm     string
	HA1MD5    string
	HA1SHA256 string
	CreatedAt time.Time
}

// SIPBinding is one registered contact of a SIP user.
type SIPBinding struct {
	Username  string
	Contact   string // the Contact URI as registered
	CallID    string
	CSeq      uint32
	ExpiresAt time.Time
	Source    string // "udp/ip:port" the REGISTER came from
	NAT       bool
	UserAgent string
	UpdatedAt time.Time
}

// AddSIPUser inserts u; ErrExists if the username is taken. A zero
// CreatedAt is set to the current time.
func (s *Store) AddSIPUser(ctx context.Context, u SIPUser) error {
	if u.Username == "" {
		return errors.New("catalog: add sip user: empty username")
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = time.Now()
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO sip_users (username, realm, ha1_md5, ha1_sha256, created_at)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (username) DO NOTHING`),
		u.Username, u.Realm, u.HA1MD5, u.HA1SHA256, u.CreatedAt.UnixMilli())
	if err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("catalog: add sip user %q: %w", u.Username, ErrExists)
		}
		return fmt.Errorf("catalog: add sip user: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("catalog: add sip user: %w", err)
	} else if n == 0 {
		return fmt.Errorf("catalog: add sip user %q: %w", u.Username, ErrExists)
	}
	return nil
}

// SIPUser returns the account named username, or ErrNotFound.
func (s *Store) SIPUser(ctx context.Context, username string) (SIPUser, error) {
	var u SIPUser
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT username, realm, ha1_md5, ha1_sha256, created_at
FROM sip_users WHERE username = ?`), username).Scan(&u.Username, &u.Realm, &u.HA1MD5, &u.HA1SHA256, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return SIPUser{}, fmt.Errorf("catalog: sip user %q: %w", username, ErrNotFound)
	}
	if err != nil {
		return SIPUser{}, fmt.Errorf("catalog: sip user: %w", err)
	}
	u.CreatedAt = time.UnixMilli(created).UTC()
	return u, nil
}

// SIPUsers lists every account, ordered by username.
func (s *Store) SIPUsers(ctx context.Context) ([]SIPUser, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT username, realm, ha1_md5, ha1_sha256, created_at
FROM sip_users ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("catalog: list sip users: %w", err)
	}
	defer rows.Close()
	var out []SIPUser
	for rows.Next() {
		var u SIPUser
		var created int64
		if err := rows.Scan(&u.Username, &u.Realm, &u.HA1MD5, &u.HA1SHA256, &created); err != nil {
			return nil, fmt.Errorf("catalog: list sip users: %w", err)
		}
		u.CreatedAt = time.UnixMilli(created).UTC()
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: list sip users: %w", err)
	}
	return out, nil
}

// DeleteSIPUser removes an account and its bindings, or returns ErrNotFound.
func (s *Store) DeleteSIPUser(ctx context.Context, username string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: delete sip user: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	// Explicit, so it holds where foreign keys are not enforced.
	if _, err := tx.ExecContext(ctx, s.q("DELETE FROM sip_bindings WHERE username = ?"), username); err != nil {
		return fmt.Errorf("catalog: delete sip user: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.q("DELETE FROM sip_users WHERE username = ?"), username)
	if err != nil {
		return fmt.Errorf("catalog: delete sip user: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("catalog: delete sip user: %w", err)
	} else if n == 0 {
		return fmt.Errorf("catalog: sip user %q: %w", username, ErrNotFound)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalog: delete sip user: %w", err)
	}
	return nil
}

// SIPBindingKey names one binding for removal.
type SIPBindingKey struct {
	Username string
	Contact  string
}

// SaveSIPBindings writes upserts and removals in one transaction. Bindings
// of users that no longer exist are skipped.
func (s *Store) SaveSIPBindings(ctx context.Context, upserts []SIPBinding, removals []SIPBindingKey) error {
	if len(upserts) == 0 && len(removals) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: save sip bindings: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if len(removals) > 0 {
		del, err := tx.PrepareContext(ctx, s.q("DELETE FROM sip_bindings WHERE username = ? AND contact = ?"))
		if err != nil {
			return fmt.Errorf("catalog: save sip bindings: %w", err)
		}
		defer del.Close()
		for _, k := range removals {
			if _, err := del.ExecContext(ctx, k.Username, k.Contact); err != nil {
				return fmt.Errorf("catalog: save sip bindings: %w", err)
			}
		}
	}
	if len(upserts) > 0 {
		// Most writes refresh a binding that is there: an UPDATE by its key
		// skips the foreign-key check and the user lookup an insert needs.
		// Only the rows it did not find go through the insert below.
		upd, err := tx.PrepareContext(ctx, s.q(`UPDATE sip_bindings SET call_id = ?, cseq = ?, expires_at = ?, source = ?,
nat = ?, user_agent = ?, updated_at = ? WHERE username = ? AND contact = ?`))
		if err != nil {
			return fmt.Errorf("catalog: save sip bindings: %w", err)
		}
		defer upd.Close()
		fresh := upserts[:0:0]
		for _, b := range upserts {
			nat := 0
			if b.NAT {
				nat = 1
			}
			res, err := upd.ExecContext(ctx, b.CallID, int64(b.CSeq), b.ExpiresAt.UnixMilli(), b.Source, nat, b.UserAgent,
				b.UpdatedAt.UnixMilli(), b.Username, b.Contact)
			if err != nil {
				return fmt.Errorf("catalog: save sip bindings: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				fresh = append(fresh, b)
			}
		}
		upserts = fresh
	}
	if len(upserts) > 0 {
		up, err := tx.PrepareContext(ctx, s.q(`INSERT INTO sip_bindings
(username, contact, call_id, cseq, expires_at, source, nat, user_agent, updated_at)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sip_users WHERE username = ?)
ON CONFLICT (username, contact) DO UPDATE SET call_id = excluded.call_id, cseq = excluded.cseq,
expires_at = excluded.expires_at, source = excluded.source, nat = excluded.nat,
user_agent = excluded.user_agent, updated_at = excluded.updated_at`))
		if err != nil {
			return fmt.Errorf("catalog: save sip bindings: %w", err)
		}
		defer up.Close()
		for _, b := range upserts {
			nat := 0
			if b.NAT {
				nat = 1
			}
			if _, err := up.ExecContext(ctx, b.Username, b.Contact, b.CallID, int64(b.CSeq), b.ExpiresAt.UnixMilli(),
				b.Source, nat, b.UserAgent, b.UpdatedAt.UnixMilli(), b.Username); err != nil {
				return fmt.Errorf("catalog: save sip bindings: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalog: save sip bindings: %w", err)
	}
	return nil
}

// SIPBindings returns every binding that has not expired at now.
func (s *Store) SIPBindings(ctx context.Context, now time.Time) ([]SIPBinding, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT username, contact, call_id, cseq, expires_at, source, nat,
user_agent, updated_at FROM sip_bindings WHERE expires_at > ? ORDER BY username, contact`), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("catalog: list sip bindings: %w", err)
	}
	defer rows.Close()
	var out []SIPBinding
	for rows.Next() {
		var b SIPBinding
		var cseq, exp, upd int64
		var nat int
		if err := rows.Scan(&b.Username, &b.Contact, &b.CallID, &cseq, &exp, &b.Source, &nat, &b.UserAgent, &upd); err != nil {
			return nil, fmt.Errorf("catalog: list sip bindings: %w", err)
		}
		b.CSeq, b.NAT = uint32(cseq), nat != 0
		b.ExpiresAt, b.UpdatedAt = time.UnixMilli(exp).UTC(), time.UnixMilli(upd).UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: list sip bindings: %w", err)
	}
	return out, nil
}

// PurgeSIPBindings deletes bindings that expired at or before now.
func (s *Store) PurgeSIPBindings(ctx context.Context, now time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM sip_bindings WHERE expires_at <= ?"), now.UnixMilli()); err != nil {
		return fmt.Errorf("catalog: purge sip bindings: %w", err)
	}
	return nil
}
