package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/floor"
)

// JoinToken is an issued join token as the API shows it (never the token
// itself, which only its holder has).
type JoinToken struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	MaxUses   int       `json:"max_uses"`
	Uses      int       `json:"uses"`
	Revoked   bool      `json:"revoked"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueJoinToken records a join token (its id is in the signed token) that
// admits up to maxUses members of role to a session that is not over, or,
// for role auth.RoleViewer, a view token, which watches the session's
// broadcast and admits no member.
func (s *Service) IssueJoinToken(ctx context.Context, sessionID, role string, maxUses int, expires time.Time) (JoinToken, error) {
	if !floor.ValidRole(role) && role != auth.RoleViewer {
		return JoinToken{}, fmt.Errorf("%w: role must be chair, participant, listener or viewer", ErrInvalid)
	}
	s.mu.Lock()
	_, err := s.control(ctx, sessionID)
	s.mu.Unlock()
	if err != nil {
		return JoinToken{}, err
	}
	t := catalog.JoinToken{ID: newID("t_"), SessionID: sessionID, Role: role, MaxUses: maxUses,
		CreatedAt: s.o.Now().UTC(), ExpiresAt: expires.UTC()}
	if err := s.o.Catalog.AddJoinToken(ctx, t); err != nil {
		return JoinToken{}, wrapCatalog(err)
	}
	return tokenView(t), nil
}

// UseJoinToken counts one member admitted with token id; ErrForbidden when
// the token is revoked, used up or unknown.
func (s *Service) UseJoinToken(ctx context.Context, sessionID, id string) error {
	err := s.o.Catalog.UseJoinToken(ctx, sessionID, id)
	switch {
	case errors.Is(err, catalog.ErrRevoked):
		return fmt.Errorf("%w: the join token was revoked", ErrForbidden)
	case errors.Is(err, catalog.ErrUsedUp):
		return fmt.Errorf("%w: the join token is used up", ErrForbidden)
	case errors.Is(err, catalog.ErrNotFound):
		return fmt.Errorf("%w: the join token is not known to this session; ask for a new one", ErrForbidden)
	}
	return err
}

// CheckJoinToken reports ErrForbidden when token id was revoked or is not
// known to the session; unlike UseJoinToken it counts no use (an HLS
// viewer watches, it does not join).
func (s *Service) CheckJoinToken(ctx context.Context, sessionID, id string) error {
	t, err := s.o.Catalog.JoinToken(ctx, sessionID, id)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return fmt.Errorf("%w: the join token is not known to this session; ask for a new one", ErrForbidden)
	case err != nil:
		return wrapCatalog(err)
	case t.Revoked:
		return fmt.Errorf("%w: the join token was revoked", ErrForbidden)
	}
	return nil
}

// JoinTokens lists a session's issued join tokens.
func (s *Service) JoinTokens(ctx context.Context, sessionID string) ([]JoinToken, error) {
	ts, err := s.o.Catalog.JoinTokens(ctx, sessionID)
	if err != nil {
		return nil, wrapCatalog(err)
	}
	out := make([]JoinToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenView(t))
	}
	return out, nil
}

// RevokeJoinToken stops token id from admitting anyone.
func (s *Service) RevokeJoinToken(ctx context.Context, sessionID, id string) error {
	return wrapCatalog(s.o.Catalog.RevokeJoinToken(ctx, sessionID, id))
}

func tokenView(t catalog.JoinToken) JoinToken {
	return JoinToken{ID: t.ID, Role: t.Role, MaxUses: t.MaxUses, Uses: t.Uses, Revoked: t.Revoked,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}
