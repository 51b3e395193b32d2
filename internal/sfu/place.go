package sfu

import (
	"context"
	"errors"

	"github.com/convene/convene/internal/capacity"
)

// Placement of browser members in a cluster (issue 16): a member whose
// signalling socket opens here may be told to meet elsewhere — the node
// the session's members meet on, near and with room (Config.Place) —
// with an error frame of code "moved" naming that node. The web app goes
// there as it does when refused over capacity (web/src/move.ts), and its
// socket there says it was moved (Placed), so a member is placed at most
// once: two nodes that disagree cannot send it back and forth. A member
// whose browser reconnects (its peer is still in the room) stays.

// ErrPlaced ends a signalling socket whose member is to meet on another
// node.
var ErrPlaced = errors.New("sfu: the member meets on another node")

type placedKey struct{}

// Placed marks ctx as the signalling of a member that was moved here
// already (its web app says so): it is not placed elsewhere again.
func Placed(ctx context.Context) context.Context {
	return context.WithValue(ctx, placedKey{}, true)
}

// place is where the member should meet instead of here, if anywhere.
func (s *SFU) place(ctx context.Context, sessionID, memberID string) (capacity.Alternative, bool) {
	if s.cfg.Place == nil || ctx.Value(placedKey{}) != nil {
		return capacity.Alternative{}, false
	}
	s.mu.Lock()
	r := s.rooms[sessionID]
	again := r != nil && r.peers[memberID] != nil
	s.mu.Unlock()
	if again {
		return capacity.Alternative{}, false
	}
	return s.cfg.Place(sessionID)
}
