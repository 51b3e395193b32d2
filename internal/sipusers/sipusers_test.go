package sipusers

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/catalog"
)

func TestHA1(t *testing.T) {
	// RFC 2617 section 3.5's example.
	got, err := HA1(MD5, "Mufasa", "testrealm@host.com", "Circle Of Life")
	if err != nil || got != "939e7578ed9e3c518a452acee763bce9" {
		t.Errorf("MD5 HA1 = %s, %v", got, err)
	}
	// RFC 7616 section 3.9.1's example, SHA-256.
	got, _ = HA1(SHA256, "Mufasa", "http-auth@example.org", "Circle of Life")
	if got != "7987c64c30e25f1b74be53f966b49b90f2808aa92faf9a00262392d7b4794232" {
		t.Errorf("SHA-256 HA1 = %s", got)
	}
	if _, err := HA1("SHA-512-256", "a", "b", "c"); err == nil {
		t.Error("unsupported algorithm accepted")
	}
}

func TestValidation(t *testing.T) {
	for _, ok := range []string{"alice", "a.b-c_d", "+4930123", "x"} {
		if err := ValidUsername(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a@b", "a:b", "ü", string(make([]byte, 65))} {
		if err := ValidUsername(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q accepted", bad)
		}
	}
	if ValidPassword("abc", 4) == nil || ValidPassword("ab\ncd", 4) == nil || ValidPassword("good-one", 4) != nil ||
		ValidPassword("good-one", 0) == nil || ValidPassword("twelve-chars", 0) != nil {
		t.Error("password rules")
	}
}

func TestServiceCache(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	now := time.Unix(1_800_000_000, 0)
	s, _ := New(Options{Catalog: cat, Realm: "r.test", CacheTTL: time.Minute, Now: func() time.Time { return now }})
	other, _ := New(Options{Catalog: cat, Realm: "r.test"}) // another process, e.g. `convene users`

	if _, found, _ := s.Lookup(ctx, "alice"); found {
		t.Fatal("alice found before she exists")
	}
	if _, err := other.Add(ctx, "alice", "pw-alice-long-enough"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Lookup(ctx, "alice"); found {
		t.Error("negative cache entry not kept for the TTL")
	}
	now = now.Add(2 * time.Minute)
	// After the TTL the stale answer comes at once and a refresh runs.
	var c Credentials
	found := false
	deadline := time.Now().Add(5 * time.Second)
	for !found && time.Now().Before(deadline) {
		c, found, err = s.Lookup(ctx, "alice")
		time.Sleep(10 * time.Millisecond)
	}
	want, _ := HA1(SHA256, "alice", "r.test", "pw-alice-long-enough")
	if err != nil || !found || c.HA1(SHA256) != want || c.HA1("") != c.HA1MD5 {
		t.Fatalf("after the TTL: %+v %v %v", c, found, err)
	}
	// Changes made through the same service show at once.
	if err := s.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Lookup(ctx, "alice"); found {
		t.Error("deleted user still found")
	}
	if _, err := s.Add(ctx, "alice", "pw-alice-long-enough"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "alice", "pw-alice-long-enough"); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate: %v", err)
	}
	if err := s.Delete(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete unknown: %v", err)
	}
	// Preload caches every account: a user added by another process shows
	// in a fresh service without waiting for a TTL.
	if _, err := other.Add(ctx, "bob", "pw-bob-long-enough"); err != nil {
		t.Fatal(err)
	}
	fresh, _ := New(Options{Catalog: cat, Realm: "r.test", CacheTTL: time.Hour})
	if err := fresh.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := fresh.Lookup(ctx, "bob"); !found {
		t.Error("bob not found after Preload")
	}
}
