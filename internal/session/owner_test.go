package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/testutil"
)

// clusterService is newService as node `node` of a cluster sharing the
// catalog file dsn, with short leases, and its catalog store.
func clusterService(t *testing.T, dsn, node string) (*Service, *catalog.Store) {
	t.Helper()
	svc, _ := newService(t, dsn)
	svc.o.Node, svc.o.LeaseTTL, svc.o.LeaseRenew = node, 600*time.Millisecond, 150*time.Millisecond
	return svc, svc.o.Catalog
}

func runLeases(t *testing.T, s *Service) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.RunLeases(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// TestOwnerPartitioned: node a owns a session and node b serves a link of
// it as a participant. Then a is cut off from the catalog (its store
// closed, so every write fails): a stops acting as owner before its lease
// expires — its room and floors go, a floor write is fenced — and b takes
// the session over with the next epoch, keeping its own link and
// re-homing a's.
func TestOwnerPartitioned(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	a, aCat := clusterService(t, dsn, "a")
	b, _ := clusterService(t, dsn, "b")
	s, err := a.Create(ctx, "spans")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Owns(s.ID) || b.Owns(s.ID) {
		t.Fatalf("owners after create: a %v b %v", a.Owns(s.ID), b.Owns(s.ID))
	}
	al, err := a.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47110", Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47112", Kind: "audio", RTCPMux: true}); err != nil {
		t.Fatalf("a link on the participant node: %v", err)
	}
	if b.Owns(s.ID) || b.Room(s.ID) == nil {
		t.Fatal("b took the session or has no room for its link")
	}
	runLeases(t, a)
	runLeases(t, b)
	got, err := b.Get(ctx, s.ID)
	if err != nil || got.Owner != "a" || got.OwnerEpoch != 1 {
		t.Fatalf("b sees owner %q epoch %d (%v)", got.Owner, got.OwnerEpoch, err)
	}

	aCat.Close() // the partition: a's catalog writes fail from now on
	testutil.WaitFor(t, 20*time.Second, "a to stop acting as owner", func() bool { return !a.Owns(s.ID) })
	if a.Room(s.ID) != nil {
		t.Error("a still serves the session's room")
	}
	if err := a.saveFloor(ctx, s.ID, "audio", []byte(`{}`)); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("a's floor write after the partition: %v", err)
	}
	testutil.WaitFor(t, 20*time.Second, "b to take the session over", func() bool { return b.Owns(s.ID) })
	got, err = b.Get(ctx, s.ID)
	if err != nil || got.Owner != "b" || got.OwnerEpoch != 2 {
		t.Fatalf("after the takeover b sees owner %q epoch %d (%v)", got.Owner, got.OwnerEpoch, err)
	}
	// a stopped serving its link when it gave the session up: the link is
	// re-homed on b, beside b's own.
	if len(got.Links) != 2 {
		t.Errorf("b's links after the takeover: %+v, want b's own and a's re-homed", got.Links)
	}
	if n, err := b.o.Catalog.LinkNode(ctx, al.ID); err != nil || n != "b" {
		t.Errorf("a's link is stored for node %q (%v), want b", n, err)
	}
	if _, err := b.Floors(ctx, s.ID); err != nil {
		t.Errorf("b's floors: %v", err)
	}
}

// TestOwnerStopsRenewing: the owner's renewals stop (a killed node, or one
// whose timer stalls); after the lease expires the other node takes over,
// and when the old owner renews again it learns it was fenced and stops.
func TestOwnerStopsRenewing(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	a, _ := clusterService(t, dsn, "a")
	b, _ := clusterService(t, dsn, "b")
	s, err := a.Create(ctx, "spans")
	if err != nil {
		t.Fatal(err)
	}
	runLeases(t, b)
	testutil.WaitFor(t, 20*time.Second, "b to take the unrenewed session", func() bool { return b.Owns(s.ID) })
	if !a.Owns(s.ID) {
		t.Fatal("a gave up without renewing")
	}
	a.renewLeases(ctx)
	if a.Owns(s.ID) {
		t.Fatal("a still owns the session after a fenced renewal")
	}
	if a.LostLeases() != 1 {
		t.Errorf("lost leases %d", a.LostLeases())
	}
	if err := a.saveFloor(ctx, s.ID, "audio", []byte(`{}`)); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("a's floor write: %v", err)
	}
	// A drained owner hands over at once.
	b.Drain()
	runLeases(t, a)
	testutil.WaitFor(t, 20*time.Second, "a to take the released session back", func() bool { return a.Owns(s.ID) })
}

// TestFloorsAcrossNodes: node a owns the session's floors; node b serves
// bob's sending link. Under floor control b gates bob's track by what a
// stored — closed while alice holds the audio floor, open once a grants
// it to bob — and b refuses to change the floors itself. When a moves bob
// to a subgroup, b moves his link too.
func TestFloorsAcrossNodes(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	a, _ := clusterService(t, dsn, "a")
	b, _ := clusterService(t, dsn, "b")
	s, err := a.Create(ctx, "floors")
	if err != nil {
		t.Fatal(err)
	}
	chair, _ := a.Join(ctx, s.ID, "chair", floor.RoleChair)
	alice, _ := a.Join(ctx, s.ID, "alice", floor.RoleParticipant)
	bob, err := b.Join(ctx, s.ID, "bob", floor.RoleParticipant) // through the participant node
	if err != nil {
		t.Fatal(err)
	}
	fl, err := a.FloorsToChange(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.FloorsToChange(ctx, s.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("b changed the floors of a's session: %v", err)
	}
	if _, err := b.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47114", Kind: "audio", RTCPMux: true, Member: bob.ID}); err != nil {
		t.Fatal(err)
	}
	bobTrack := func() *broker.Track {
		for _, tr := range b.Room(s.ID).Tracks() {
			return tr
		}
		return nil
	}
	if tr := bobTrack(); tr == nil || tr.Gated() {
		t.Fatal("bob's track on b is missing or gated before floor control")
	}
	if _, err := fl.SetStyle(chair.ID, "audio", floor.Settings{Style: floor.StyleFloorControl}); err != nil {
		t.Fatal(err)
	}
	ra, err := fl.Request(alice.ID, "audio")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Grant(chair.ID, ra.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.FloorsSaved(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	b.FloorsChanged(s.ID)
	testutil.WaitFor(t, 10*time.Second, "b to gate bob's track", func() bool { return bobTrack().Gated() })
	rb, err := fl.Request(bob.ID, "audio")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Release(alice.ID, "audio"); err != nil {
		t.Fatal(err)
	}
	if r, err := fl.Grant(chair.ID, rb.ID); err != nil || r.Status != floor.Granted {
		t.Fatalf("grant bob: %+v %v", r, err)
	}
	if err := a.FloorsSaved(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	b.catchUp(ctx) // the lease round, without FloorsChanged
	if bobTrack().Gated() {
		t.Error("bob holds the floor on a, but b still gates his track")
	}
	bf, err := b.Floors(ctx, s.ID) // b's reader's copy, for its API
	if err != nil || !bf.Holds(bob.ID, "audio") || bf.Holds(alice.ID, "audio") {
		t.Errorf("b's copy of the floors: bob holds %v, alice holds %v (%v)", bf.Holds(bob.ID, "audio"), bf.Holds(alice.ID, "audio"), err)
	}

	// A subgroup made on a, with bob in it: b's room moves his link at its
	// next round.
	g, err := a.CreateSubgroup(ctx, s.ID, "side", chair.ID, []string{bob.ID})
	if err != nil {
		t.Fatal(err)
	}
	b.catchUp(ctx)
	if snd := b.Room(s.ID).Senders(); len(snd) != 1 || snd[0].Group != g.ID {
		t.Errorf("bob's track on b is in %+v, want subgroup %s", snd, g.ID)
	}
}

// TestRehomeAndDropMoved: node b serves a link of a session node a owns;
// a takes b for dead and re-homes the link (Rehome): it runs on a, stored
// as a's; b, which was only cut off, closes its copy at DropMovedLinks,
// and a's own link stays open on a.
func TestRehomeAndDropMoved(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	a, cat := clusterService(t, dsn, "a")
	b, _ := clusterService(t, dsn, "b")
	s, err := a.Create(ctx, "rehome")
	if err != nil {
		t.Fatal(err)
	}
	own, err := a.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47120", Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	bl, err := b.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47122", Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Rehome(ctx, s.ID, "a"); err != nil || b.Load().Links != 1 {
		t.Fatalf("a node that does not own the session re-homed links: %v, %d links", err, b.Load().Links)
	}
	if err := a.Rehome(ctx, s.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if n, err := cat.LinkNode(ctx, bl.ID); err != nil || n != "a" {
		t.Fatalf("b's link is stored on %q (%v), want a", n, err)
	}
	if a.Load().Links != 2 {
		t.Fatalf("a serves %d links after the re-homing, want 2", a.Load().Links)
	}
	a.DropMovedLinks(ctx)
	b.DropMovedLinks(ctx)
	if a.Load().Links != 2 || b.Load().Links != 0 {
		t.Errorf("after DropMovedLinks: a serves %d links (want 2), b %d (want 0)", a.Load().Links, b.Load().Links)
	}
	if n, _ := cat.LinkNode(ctx, own.ID); n != "a" {
		t.Errorf("a's own link is stored on %q", n)
	}
	// A link b serves that the node it moved to removed (a phone's
	// links, made anew by the node that took its call over): b closes it.
	gone, err := b.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47124", Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.RemoveLink(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	b.DropMovedLinks(ctx)
	if b.Load().Links != 0 {
		t.Errorf("b serves %d links after its link was removed elsewhere, want 0", b.Load().Links)
	}
}
