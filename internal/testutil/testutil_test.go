package testutil

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// recorder stands in for a test: it records a Skipf or Fatalf and ends the
// goroutine, as the testing package does.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped = fmt.Sprintf(f, a...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = fmt.Sprintf(f, a...)
	runtime.Goexit()
}

// as runs f against a fresh recorder in its own goroutine.
func as(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r
}

func TestNeedBinary(t *testing.T) {
	t.Setenv("CI", "")
	var got string
	r := as(t, func(tb testing.TB) { got = NeedBinary(tb, "sh") })
	if r.skipped != "" || r.failed != "" || filepath.Base(got) != "sh" {
		t.Fatalf("sh on PATH: got %q, skipped %q, failed %q", got, r.skipped, r.failed)
	}

	t.Setenv("PATH", t.TempDir()) // nothing installed
	r = as(t, func(tb testing.TB) { NeedBinary(tb, "sh") })
	if r.failed != "" || !strings.Contains(r.skipped, "sh is not installed") {
		t.Errorf("missing, outside CI: skipped %q, failed %q; want a skip naming it", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	r = as(t, func(tb testing.TB) { NeedBinary(tb, "sh") })
	if r.skipped != "" || !strings.Contains(r.failed, "sh is not installed") {
		t.Errorf("missing under CI=true: skipped %q, failed %q; want a failure naming it", r.skipped, r.failed)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	r := as(t, func(tb testing.TB) { WaitFor(tb, 10*time.Second, "three polls", func() bool { n++; return n == 3 }) })
	if r.failed != "" || n != 3 {
		t.Fatalf("a condition that comes true: failed %q after %d polls", r.failed, n)
	}
	r = as(t, func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "never", func() bool { return false }) })
	if !strings.Contains(r.failed, "waiting for never") {
		t.Fatalf("a condition that never holds: failed %q; want a failure naming it", r.failed)
	}
}

func TestPostgres(t *testing.T) {
	p := NeedPostgres(t)
	dsn, err := p.CreateDatabase(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var who string
	if err := c.QueryRow(ctx, "SELECT current_user || '@' || current_database()").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(who, "convene@t_testpostgres_") {
		t.Errorf("connected as %q", who)
	}
	// The password is required: the same DSN without it is refused.
	if c2, err := pgx.Connect(ctx, strings.Replace(dsn, ":"+p.Password()+"@", "@", 1)); err == nil {
		c2.Close(ctx)
		t.Error("connected without the password")
	}
}

func TestNATSCluster(t *testing.T) {
	c := StartNATSCluster(t, 3)
	if n := strings.Count(c.URLs(), ","); n != 2 {
		t.Errorf("URLs = %q", c.URLs())
	}
	s := c.Servers[0]
	if c.ByURL(s.URL()) != s {
		t.Error("ByURL does not find the first server")
	}
	s.Kill(t)
	if s.Running() {
		t.Fatal("killed server still running")
	}
	c.WaitRouted(t) // the other two still route to each other
	s.Start(t)
	c.WaitRouted(t) // and the restarted one joins them again
}
