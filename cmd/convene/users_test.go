package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/sipusers"
)

func TestUsersCommand(t *testing.T) {
	dir := t.TempDir()
	env := []string{"CONVENE_SIP_DOMAIN=example.test"}
	users := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := usersCmd(append(args, "-data-dir", dir), env, strings.NewReader("from-stdin-pw\n"), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := users("add", "alice", "--password", "s3cret-password"); code != 0 || !strings.Contains(out, "sip:alice@example.test") {
		t.Fatalf("add alice: %d %q %q", code, out, errs)
	}
	if code, _, errs := users("add", "bob"); code != 0 {
		t.Fatalf("add bob (password from stdin): %d %q", code, errs)
	}
	if code, _, errs := users("add", "alice", "--password", "other-password"); code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("duplicate: %d %q", code, errs)
	}
	if code, _, _ := users("add", "bad name", "--password", "s3cret-password"); code != 2 {
		t.Errorf("invalid name: %d, want 2", code)
	}
	// Issue 11 item 13: 12 characters at least unless the config lowers it.
	if code, _, errs := users("add", "carol", "--password", "short-pw"); code == 0 || !strings.Contains(errs, "12 to 128") {
		t.Errorf("an 8-character password: %d %q, want refused with the rule", code, errs)
	}
	if code, _, errs := users("add", "carol", "--password", "short-pw", "-sip-min-password-length", "8"); code != 0 {
		t.Errorf("an 8-character password with sip.min_password_length 8: %d %q", code, errs)
	}
	code, out, _ := users("list")
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") || strings.Contains(out, "s3cret") {
		t.Errorf("list: %d %q", code, out)
	}
	if code, _, errs := users("delete", "bob"); code != 0 {
		t.Errorf("delete: %d %q", code, errs)
	}
	if code, _, _ := users("delete", "bob"); code != 1 {
		t.Errorf("delete again: %d, want 1", code)
	}

	// Only digests are stored, for the configured realm.
	cat, err := catalog.Open(context.Background(), "sqlite", dir+"/convene.db")
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	u, err := cat.SIPUser(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sipusers.HA1(sipusers.SHA256, "alice", "example.test", "s3cret-password")
	if u.Realm != "example.test" || u.HA1SHA256 != want || len(u.HA1MD5) != 32 {
		t.Errorf("stored %+v, want realm example.test and SHA-256 HA1 %s", u, want)
	}
	if _, err := cat.SIPUser(context.Background(), "bob"); err == nil {
		t.Error("bob still stored after delete")
	}
}
