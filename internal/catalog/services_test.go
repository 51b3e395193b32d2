package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMediaServiceMoves(t *testing.T) { forDrivers(t, testMediaServiceMoves) }

// testMediaServiceMoves: an HLS stream and a composite started on node a
// are recorded with their requests; the session's owner b moves each to
// itself only under its current lease and only once (a second survivor
// that read the same row is refused); a late stop by a removes nothing
// that moved on; ServiceNodes names their nodes while the session is
// active; a restarted node's rows are orphaned; the session's end removes
// them all, and so does its deletion.
func testMediaServiceMoves(t *testing.T, drv backend) {
	ctx := context.Background()
	s, _ := newStore(t, drv)
	if err := s.CreateSession(ctx, Session{ID: "s_1", State: "activated", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	hls := MediaService{Kind: ServiceHLS, ID: "s_1", SessionID: "s_1", Request: `{"video":"composite"}`, Node: "a",
		Member: "m_c1", StartedBy: "operator", StartedAt: ms(time.Second)}
	comp := MediaService{Kind: ServiceComposite, ID: "c_1", SessionID: "s_1", Request: `{"layout":"grid3","codec":"H264"}`,
		Node: "a", Member: "m_c2", StartedBy: "m_chair", StartedAt: ms(2 * time.Second)}
	for _, m := range []MediaService{hls, comp} {
		if err := s.PutMediaService(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMediaService(ctx, MediaService{Kind: ServiceHLS, ID: "s_x", SessionID: "s_x", Request: "{}", Node: "a",
		StartedAt: ms(0)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a service of an unknown session: %v, want ErrNotFound", err)
	}
	got, err := s.MediaServices(ctx, "s_1")
	if err != nil || len(got) != 2 {
		t.Fatalf("media services: %+v %v", got, err)
	}
	// by kind: composite, then hls
	if c := got[0]; c.Kind != ServiceComposite || c.ID != "c_1" || c.Request != comp.Request || c.Node != "a" ||
		c.Member != "m_c2" || c.StartedBy != "m_chair" {
		t.Errorf("the composite's row: %+v", c)
	}
	wantTime(t, "composite started_at", got[0].StartedAt, comp.StartedAt)
	if h := got[1]; h.Kind != ServiceHLS || h.ID != "s_1" || h.Request != hls.Request || h.Member != "m_c1" {
		t.Errorf("the stream's row: %+v", h)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "a" {
		t.Errorf("service nodes: %q %v", ns, err)
	}

	// a dies; b owns the session and moves both, c (no lease) cannot.
	late := ms(10 * time.Second)
	bl, ok, err := s.AcquireLease(ctx, "s_1", "b", late, 6*time.Second)
	if err != nil || !ok {
		t.Fatalf("b's lease: %v %v", ok, err)
	}
	cl := Lease{SessionID: "s_1", Node: "c", Epoch: bl.Epoch, Expires: bl.Expires}
	if err := s.MoveMediaService(ctx, cl, late, comp, "c", "m_c3"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a node without the lease moved the composite: %v", err)
	}
	if err := s.MoveMediaService(ctx, bl, late, comp, "b", "m_c3"); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveMediaService(ctx, bl, late, comp, "b", "m_c4"); !errors.Is(err, ErrMoved) {
		t.Fatalf("the composite moved twice from node a: %v", err)
	}
	if err := s.MoveMediaService(ctx, bl, late.Add(7*time.Second), hls, "b", ""); !errors.Is(err, ErrFenced) {
		t.Fatalf("a move under an expired lease: %v", err)
	}
	if err := s.MoveMediaService(ctx, bl, late, hls, "b", "m_c5"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.MediaServices(ctx, "")
	if len(got) != 2 || got[0].Node != "b" || got[0].Member != "m_c3" || got[0].Request != comp.Request ||
		got[1].Node != "b" || got[1].Member != "m_c5" {
		t.Fatalf("after the moves: %+v", got)
	}
	// a, back from a partition, stops its composite: b's row stays.
	if err := s.RemoveMediaService(ctx, ServiceComposite, "c_1", "a"); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "b" {
		t.Errorf("service nodes after the moves: %q %v", ns, err)
	}

	// b restarts after a crash: nobody runs them; moved from "" once.
	if n, err := s.OrphanMediaServices(ctx, "b"); err != nil || n != 2 {
		t.Fatalf("orphaned %d: %v", n, err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "" {
		t.Errorf("service nodes with orphans: %q %v", ns, err)
	}
	comp.Node = ""
	if err := s.MoveMediaService(ctx, bl, late, comp, "b", "m_c6"); err != nil {
		t.Fatal(err)
	}

	// It stops on b unasked (its room went): let go once.
	comp.Node = "b"
	if err := s.OrphanMediaService(ctx, comp); err != nil {
		t.Fatal(err)
	}
	if err := s.OrphanMediaService(ctx, comp); !errors.Is(err, ErrMoved) {
		t.Errorf("orphaned twice: %v", err)
	}
	comp.Node = ""
	if err := s.MoveMediaService(ctx, bl, late, comp, "b", "m_c6"); err != nil {
		t.Fatal(err)
	}

	// Stopped through the API on b: gone.
	if err := s.RemoveMediaService(ctx, ServiceComposite, "c_1", "b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MediaServices(ctx, "s_1"); len(got) != 1 || got[0].Kind != ServiceHLS {
		t.Errorf("after the composite's stop: %+v", got)
	}
	// Started again: the row is replaced.
	hls.Node, hls.Request = "c", `{}`
	if err := s.PutMediaService(ctx, hls); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MediaServices(ctx, "s_1"); len(got) != 1 || got[0].Node != "c" || got[0].Request != "{}" {
		t.Errorf("after a new start: %+v", got)
	}

	// A session no longer active has no service nodes; its end removes
	// its rows, and its deletion does too.
	if err := s.SetSessionState(ctx, "s_1", "deactivated", ms(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 0 {
		t.Errorf("service nodes of a deactivated session: %q %v", ns, err)
	}
	if err := s.RemoveSessionMediaServices(ctx, "s_1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MediaServices(ctx, ""); len(got) != 0 {
		t.Errorf("after the session's end: %+v", got)
	}
	if err := s.CreateSession(ctx, Session{ID: "s_2", State: "activated", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMediaService(ctx, MediaService{Kind: ServiceComposite, ID: "c_2", SessionID: "s_2", Request: "{}",
		Node: "a", StartedBy: "operator", StartedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s_2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MediaServices(ctx, ""); len(got) != 0 {
		t.Errorf("after the session's deletion: %+v", got)
	}
}
