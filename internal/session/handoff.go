package session

import (
	"context"
	"fmt"
)

// Placing a new session (issue 16): the node a session was created on may
// hand it to a node with more room at once (node/place.go decides). It
// stops acting as owner, releases its lease, and asks that node to adopt
// the session now (Adopt), before any other node's round could take it
// over; if that node does not, this one takes it back. A session is handed
// off only right after it was created, with no links yet: nothing of it
// moves but its control.

// HandOff gives session id, which this node owns, to another node: ask
// must make that node Adopt it. Without the lease (someone else owns it)
// it does nothing; if ask fails, this node owns the session again.
func (s *Service) HandOff(ctx context.Context, id string, ask func(ctx context.Context) error) error {
	if s.o.Node == "" {
		return nil
	}
	s.mu.Lock()
	l, ok := s.lease(id)
	if !ok || s.draining {
		s.mu.Unlock()
		return nil
	}
	s.disown(id)
	s.disarm(id)
	s.closeMedia(id)
	s.dropControl(id)
	err := s.o.Catalog.ReleaseLease(ctx, l)
	s.mu.Unlock()
	if err == nil {
		if err = ask(ctx); err == nil {
			s.log.Info("session handed off", "session", id, "epoch", l.Epoch)
			return nil
		}
	}
	// Not taken: back here (unless another node's round took it meanwhile).
	if _, _, aerr := s.adopt(ctx, id); aerr != nil {
		return fmt.Errorf("hand off session %s: %v; taking it back: %w", id, err, aerr)
	}
	return fmt.Errorf("hand off session %s: %w", id, err)
}

// Adopt makes this node the owner of session id if nobody holds it now
// (one handed to it, HandOff), as a takeover does; it reports whether it
// took it.
func (s *Service) Adopt(ctx context.Context, id string) (bool, error) {
	took, prev, err := s.adopt(ctx, id)
	if took && s.o.OnTakeOver != nil {
		s.o.OnTakeOver(id, prev)
	}
	return took, err
}
