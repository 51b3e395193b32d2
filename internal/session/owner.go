package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/media"
)

// Ownership (issue 16): when Options.Node is set, every session that is
// not over has one owner node at a time, by a lease in the catalog
// (catalog.AcquireLease). The owner holds the session's floor controller
// as the one that writes it, runs its scheduler's timers and restores its
// stored links; any other node that has members' links of the session
// serves them as a participant (a room of its own, bridged to the others)
// and never writes the floors. RunLeases renews the leases every
// LeaseRenew and takes over sessions whose lease expired (LeaseTTL after
// their owner's last renewal). A node that cannot renew (cut off from the
// catalog) stops acting as the owner before its lease can expire, and
// every floor write carries the lease's epoch (SaveFloorStateFenced), so
// there are never two floor owners. With Node "" the service owns every
// session it has, as a single node always did.
//
// Lock order: mu → leaseMu. The floor saver's goroutine takes leaseMu
// alone (dropControl waits for it under mu).

// Default lease timing.
const (
	DefaultLeaseTTL   = 6 * time.Second
	DefaultLeaseRenew = 2 * time.Second
)

// lease returns the node's current lease of a session; ok is false when
// it does not own it.
func (s *Service) lease(id string) (catalog.Lease, bool) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l, ok := s.owned[id]
	return l, ok
}

// Owns reports whether this node is the session's owner (always, without
// Options.Node).
func (s *Service) Owns(id string) bool {
	if s.o.Node == "" {
		return true
	}
	_, ok := s.lease(id)
	return ok
}

// acquire tries to make this node the session's owner; mu is held.
func (s *Service) acquire(ctx context.Context, id string) (bool, error) {
	if s.o.Node == "" {
		return true, nil
	}
	l, ok, err := s.o.Catalog.AcquireLease(ctx, id, s.o.Node, s.o.Now(), s.o.LeaseTTL)
	if err != nil || !ok {
		return false, err
	}
	s.leaseMu.Lock()
	s.owned[id] = l
	s.leaseMu.Unlock()
	return true, nil
}

// disown forgets the session's lease; mu is held.
func (s *Service) disown(id string) (catalog.Lease, bool) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l, ok := s.owned[id]
	delete(s.owned, id)
	return l, ok
}

// saveFloor writes one floor's state: fenced by the lease when ownership
// is on, so a node that is not (or no longer) the owner cannot.
func (s *Service) saveFloor(ctx context.Context, id, name string, b []byte) error {
	if s.o.Node == "" {
		return s.o.Catalog.SaveFloorState(ctx, id, name, b)
	}
	l, ok := s.lease(id)
	if !ok {
		return fmt.Errorf("session %s: %w", id, catalog.ErrFenced)
	}
	return s.o.Catalog.SaveFloorStateFenced(ctx, l, s.o.Now(), name, b)
}

// RunLeases keeps the node's leases until ctx ends: every LeaseRenew it
// renews those it holds (giving up any it cannot), takes over the
// sessions nobody holds, and catches up with lifecycle changes other
// nodes made in the catalog. Without Options.Node it returns at once.
func (s *Service) RunLeases(ctx context.Context) {
	if s.o.Node == "" {
		return
	}
	t := time.NewTicker(s.o.LeaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.renewLeases(ctx)
		s.takeOver(ctx)
		s.catchUp(ctx)
		if s.o.OnRound != nil {
			s.o.OnRound(ctx)
		}
	}
}

// renewLeases renews every lease held. A lease the catalog refuses (taken
// over) is given up at once; one that cannot be renewed (the catalog
// unreachable) is given up one renewal interval before it expires, so the
// node has stopped acting as owner before any other node may take over.
func (s *Service) renewLeases(ctx context.Context) {
	s.leaseMu.Lock()
	held := make([]catalog.Lease, 0, len(s.owned))
	for _, l := range s.owned {
		held = append(held, l)
	}
	s.leaseMu.Unlock()
	for _, l := range held {
		rctx, cancel := context.WithTimeout(ctx, s.o.LeaseRenew)
		nl, err := s.o.Catalog.RenewLease(rctx, l, s.o.Now(), s.o.LeaseTTL)
		cancel()
		switch {
		case err == nil:
			s.leaseMu.Lock()
			if cur, ok := s.owned[l.SessionID]; ok && cur.Epoch == l.Epoch {
				s.owned[l.SessionID] = nl
			}
			s.leaseMu.Unlock()
		case errors.Is(err, catalog.ErrFenced):
			s.giveUp(l, "lease taken over")
		case !s.o.Now().Before(l.Expires.Add(-s.o.LeaseRenew)):
			s.giveUp(l, "lease not renewed: "+err.Error())
		default:
			s.log.Warn("renew session lease", "session", l.SessionID, "epoch", l.Epoch, "err", err)
		}
	}
}

// giveUp stops acting as a session's owner: its floors, timers and this
// node's media of it stop here (the catalog keeps them for the next owner).
func (s *Service) giveUp(l catalog.Lease, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.lease(l.SessionID); !ok || cur.Epoch != l.Epoch {
		return
	}
	s.disown(l.SessionID)
	s.disarm(l.SessionID)
	s.closeMedia(l.SessionID)
	s.dropControl(l.SessionID)
	s.lostLeases.Add(1)
	s.log.Warn("session ownership lost", "session", l.SessionID, "epoch", l.Epoch, "why", why)
}

// takeOver becomes the owner of the sessions not over that no node holds
// (their owner stopped renewing), bringing back their floors, timers and
// the links stored for this node or for none.
func (s *Service) takeOver(ctx context.Context) {
	ids, err := s.o.Catalog.Unowned(ctx, s.o.Now())
	if err != nil {
		s.log.Warn("list unowned sessions", "err", err)
		return
	}
	for _, id := range ids {
		took, prev, err := s.adopt(ctx, id)
		if err != nil {
			s.log.Warn("take over session", "session", id, "err", err)
		}
		if took && s.o.OnTakeOver != nil {
			s.o.OnTakeOver(id, prev)
		}
	}
}

// adopt takes a session over if nobody holds it; prev is the node that
// held it before.
func (s *Service) adopt(ctx context.Context, id string) (took bool, prev string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false, "", nil
	}
	// prev, the owner whose lease expired, stopped serving (fencing), so
	// its links move here
	if l, err := s.o.Catalog.Owner(ctx, id); err == nil && l.Node != s.o.Node {
		prev = l.Node
	}
	ok, err := s.acquire(ctx, id)
	if err != nil || !ok {
		return false, "", err
	}
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return true, prev, err
	}
	if err := s.takeOwnership(ctx, rec, prev); err != nil {
		return true, prev, err
	}
	l, _ := s.lease(id)
	s.log.Info("session taken over", "session", id, "epoch", l.Epoch, "from", prev)
	return true, prev, nil
}

// Leases returns the leases of the sessions this node owns (none without
// Options.Node).
func (s *Service) Leases() []catalog.Lease {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	out := make([]catalog.Lease, 0, len(s.owned))
	for _, l := range s.owned {
		out = append(out, l)
	}
	return out
}

// Lease returns this node's lease of a session; ok is false when it does
// not own it (or without Options.Node).
func (s *Service) Lease(id string) (catalog.Lease, bool) { return s.lease(id) }

// Rehome moves to this node the stored links of an active session it owns
// that ran on node, which died (the node's registry no longer hears it):
// as at a takeover, each is opened on this node's socket, recorded as
// this node's, and announced as link.added with its new local address.
// Nothing happens if this node does not own the session or has no room
// of it.
func (s *Service) Rehome(ctx context.Context, id, node string) error {
	if s.o.Node == "" || node == "" || node == s.o.Node {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.live[id]
	if ls == nil || s.draining || !s.Owns(id) {
		return nil
	}
	return s.restoreLinks(ctx, id, ls, node)
}

// takeOwnership sets a session up on its (new) owner: control from the
// catalog, media if it is active — with the links of prev, the owner that
// stopped, re-homed here — and timers; mu is held.
func (s *Service) takeOwnership(ctx context.Context, rec catalog.Session, prev string) error {
	if c := s.ctl[rec.ID]; c != nil { // a participant until now: its floors are stale
		s.dropControl(rec.ID)
	}
	c, err := s.loadControl(ctx, rec.ID)
	if err != nil {
		return err
	}
	if ls := s.live[rec.ID]; ls != nil { // the participant's links: under the new floors' gates
		for id, l := range ls.links {
			kind, _ := media.ParseKind(l.rec.Kind)
			c.gates.add(id, l.member, kind, l.media.Track())
		}
	}
	if rec.State == StateActivated {
		if err := s.openMedia(ctx, rec.ID); err != nil {
			return err
		}
		if err := s.restoreLinks(ctx, rec.ID, s.live[rec.ID], prev); err != nil {
			return err
		}
	}
	s.arm(rec)
	return nil
}

// participate opens an active session on a node that does not own it, for
// a member's link there: its control (members, subgroups; the floors are
// read, never written) and a room; mu is held.
func (s *Service) participate(ctx context.Context, id string) error {
	if s.ctl[id] == nil {
		c, err := s.loadControl(ctx, id)
		if err != nil {
			return err
		}
		s.mirrorFloors(ctx, id, c)
	}
	if s.live[id] == nil {
		if err := s.openMedia(ctx, id); err != nil {
			return err
		}
		s.log.Info("session joined as a participant node", "session", id)
	}
	return nil
}

// restores reports whether this node brings back a stored link: its own,
// one of node rehome (a stopped owner's, moving here), or, on the owner,
// one stored before links had a node.
func (s *Service) restores(ctx context.Context, sessionID, linkID, rehome string) (bool, error) {
	if s.o.Node == "" {
		return true, nil
	}
	node, err := s.o.Catalog.LinkNode(ctx, linkID)
	if err != nil {
		return false, err
	}
	if node == "" {
		return s.Owns(sessionID), nil
	}
	return node == s.o.Node || (rehome != "" && node == rehome), nil
}

// catchUp applies what other nodes changed in the catalog to the sessions
// this node has: members and subgroups (syncMembers), and lifecycle: one that is over is closed here; one
// deactivated loses its media here, and its owner reopens it when it is
// activated again.
func (s *Service) catchUp(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.ctl {
		s.syncMembers(ctx, c, id)
		rec, err := s.o.Catalog.GetSession(ctx, id)
		if err != nil {
			continue
		}
		switch {
		case Final(rec.State):
			s.closeMedia(id)
			s.dropControl(id)
			s.disarm(id)
			if l, ok := s.disown(id); ok {
				_ = s.o.Catalog.ReleaseLease(ctx, l)
			}
		case rec.State != StateActivated:
			s.closeMedia(id)
		case s.live[id] == nil && s.Owns(id):
			if err := s.openMedia(ctx, id); err != nil {
				s.log.Warn("reopen session", "session", id, "err", err)
			}
		case !s.Owns(id):
			s.mirrorFloors(ctx, id, s.ctl[id])
		}
	}
}

// releaseAll gives up every lease (a drain), so other nodes take the
// sessions over at their next look instead of after the TTL; mu is held.
func (s *Service) releaseAll() {
	s.leaseMu.Lock()
	held := s.owned
	s.owned = map[string]catalog.Lease{}
	s.leaseMu.Unlock()
	for _, l := range held {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := s.o.Catalog.ReleaseLease(ctx, l); err != nil {
			s.log.Warn("release session lease", "session", l.SessionID, "err", err)
		}
		cancel()
	}
}

// LostLeases counts the sessions this node stopped owning because it
// could not renew their lease or another node had taken them
// (convene_session_leases_lost_total).
func (s *Service) LostLeases() uint64 { return s.lostLeases.Load() }

// DropMovedLinks closes here the stored links the catalog says run on
// another node now: a session's owner took this node for dead (it was
// only cut off from the others) and re-homed them, so the endpoint is not
// served twice. The catalog keeps them; only this node's media of them
// stop. The node calls it every lease round.
func (s *Service) DropMovedLinks(ctx context.Context) {
	if s.o.Node == "" {
		return
	}
	ids, err := s.o.Catalog.NodeLinks(ctx, s.o.Node)
	if err != nil {
		return // the catalog cannot tell; the leases decide for owned sessions
	}
	mine := make(map[string]bool, len(ids))
	for _, id := range ids {
		mine[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sid, ls := range s.live {
		for lid, l := range ls.links {
			if l.live || mine[lid] {
				continue
			}
			node, err := s.o.Catalog.LinkNode(ctx, lid) // stored after the list was read?
			if err != nil || node == s.o.Node {
				continue
			}
			if node == "" { // stored before links had a node, or removed by the node it moved to
				if _, err := s.o.Catalog.GetLink(ctx, lid); !errors.Is(err, catalog.ErrNotFound) {
					continue
				}
				node = "(removed)"
			}
			s.closeLink(l)
			delete(ls.links, lid)
			if c := s.ctl[sid]; c != nil {
				c.gates.remove(lid)
			}
			s.log.Warn("link moved to another node: closed here", "session", sid, "link", lid, "now_on", node)
		}
	}
}
