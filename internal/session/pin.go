package session

import (
	"context"
)

// SetPIN keeps the digests of a session's guest dial-in PIN (the API makes
// the PIN and shows it once); the session must not be over.
func (s *Service) SetPIN(ctx context.Context, sessionID, ha1MD5, ha1SHA256 string) error {
	if _, err := s.Get(ctx, sessionID); err != nil {
		return err
	}
	return wrapCatalog(s.o.Catalog.SetSessionPIN(ctx, sessionID, ha1MD5, ha1SHA256))
}

// PIN returns the digests of a session's guest PIN; ok is false without one.
func (s *Service) PIN(ctx context.Context, sessionID string) (ha1MD5, ha1SHA256 string, ok bool, err error) {
	md5, sha, ok, err := s.o.Catalog.SessionPIN(ctx, sessionID)
	return md5, sha, ok, wrapCatalog(err)
}

// ClearPIN removes a session's guest PIN: guests can no longer dial in.
func (s *Service) ClearPIN(ctx context.Context, sessionID string) error {
	return wrapCatalog(s.o.Catalog.DeleteSessionPIN(ctx, sessionID))
}
