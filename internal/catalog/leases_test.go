package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeases(t *testing.T) { forDrivers(t, testLeases) }

// testLeases: one owner at a time; a takeover only after expiry, with a
// higher epoch; the old owner's renewals and floor writes are fenced.
func testLeases(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
	if err := s.CreateSession(ctx, Session{ID: "s_1", State: "activated", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	t0 := ms(0)
	ttl := 6 * time.Second
	a, ok, err := s.AcquireLease(ctx, "s_1", "a", t0, ttl)
	if err != nil || !ok || a.Epoch != 1 {
		t.Fatalf("first acquire: %+v %v %v", a, ok, err)
	}
	if _, ok, err := s.AcquireLease(ctx, "s_1", "b", t0.Add(time.Second), ttl); err != nil || ok {
		t.Fatalf("b took a held lease: %v %v", ok, err)
	}
	if ids, err := s.Unowned(ctx, t0.Add(time.Second)); err != nil || len(ids) != 0 {
		t.Fatalf("unowned while held: %v %v", ids, err)
	}
	if a, err = s.RenewLease(ctx, a, t0.Add(2*time.Second), ttl); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveFloorStateFenced(ctx, a, t0.Add(3*time.Second), "audio", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	// a stops renewing; after its expiry b takes over with epoch 2.
	late := t0.Add(2*time.Second + ttl + time.Millisecond)
	if ids, err := s.Unowned(ctx, late); err != nil || len(ids) != 1 {
		t.Fatalf("unowned after expiry: %v %v", ids, err)
	}
	bl, ok, err := s.AcquireLease(ctx, "s_1", "b", late, ttl)
	if err != nil || !ok || bl.Epoch != 2 {
		t.Fatalf("takeover: %+v %v %v", bl, ok, err)
	}
	if _, err := s.RenewLease(ctx, a, late, ttl); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner renewed: %v", err)
	}
	if err := s.SaveFloorStateFenced(ctx, a, late, "audio", []byte(`{"a":2}`)); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's floor write: %v", err)
	}
	if err := s.SaveFloorStateFenced(ctx, bl, late, "audio", []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	st, err := s.FloorStates(ctx, "s_1")
	if err != nil || string(st["audio"]) != `{"b":1}` {
		t.Fatalf("floor state %q %v", st["audio"], err)
	}
	o, err := s.Owner(ctx, "s_1")
	if err != nil || o.Node != "b" || o.Epoch != 2 {
		t.Fatalf("owner %+v %v", o, err)
	}
	// A released lease is free at once; the same node re-acquiring gets a new epoch.
	if err := s.ReleaseLease(ctx, bl); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := s.AcquireLease(ctx, "s_1", "c", late, ttl); err != nil || !ok || c.Epoch != 3 {
		t.Fatalf("after release: %+v %v %v", c, ok, err)
	}
	if c, ok, err := s.AcquireLease(ctx, "s_1", "c", late, ttl); err != nil || !ok || c.Epoch != 4 {
		t.Fatalf("restarted owner: %+v %v %v", c, ok, err)
	}
	// Links remember their node.
	if err := s.AddLink(ctx, Link{ID: "l_1", SessionID: "s_1", Type: "rtp", Kind: "audio", Direction: "sendrecv", Remote: "127.0.0.1:4000"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.LinkNode(ctx, "l_1"); err != nil || n != "" {
		t.Fatalf("link node before: %q %v", n, err)
	}
	if err := s.SetLinkNode(ctx, "l_1", "b"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.LinkNode(ctx, "l_1"); err != nil || n != "b" {
		t.Fatalf("link node: %q %v", n, err)
	}
}
