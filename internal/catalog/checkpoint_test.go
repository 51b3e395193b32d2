package catalog

import (
	"context"
	"path/filepath"
	"testing"
)

// The store's own connection never checkpoints inside a commit; the
// background connection does, and Close still leaves everything in the
// main file.
func TestCheckpointsOffTheWritePath(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(ctx, "sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n); err != nil || n != 0 {
		t.Fatalf("wal_autocheckpoint = %d (%v), want 0", n, err)
	}
	if s.ckpt == nil {
		t.Fatal("no background checkpointer for a file database")
	}
	if err := s.CreateSession(ctx, Session{ID: "s1", Name: "x", State: "activated"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ckpt.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		t.Fatalf("checkpoint from the second connection: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, "sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.GetSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	mem, err := Open(ctx, "sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if mem.ckpt != nil {
		t.Error("in-memory database got a second connection")
	}
}
