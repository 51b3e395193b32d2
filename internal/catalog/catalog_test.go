package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTest(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), "sqlite", path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	return s
}

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "dir", "catalog.db") // parent dirs created by Open
	s := openTest(t, path)
	t.Cleanup(func() { s.Close() })
	return s, path
}

// ms is a base time with sub-millisecond noise and a non-UTC zone.
func ms(offset time.Duration) time.Time {
	loc := time.FixedZone("X", 3*3600)
	return time.Date(2025, 6, 1, 12, 0, 0, 123_456_789, loc).Add(offset)
}

func wantTime(t *testing.T, field string, got, in time.Time) {
	t.Helper()
	if in.IsZero() {
		if !got.IsZero() {
			t.Errorf("%s = %v, want zero", field, got)
		}
		return
	}
	want := in.Truncate(time.Millisecond)
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("%s = %v (%v), want %v in UTC", field, got, got.Location(), want)
	}
	if got.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("%s has sub-ms precision: %v", field, got)
	}
}

func TestOpenPragmasAndMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "catalog.db")
	s := openTest(t, path)

	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(mode, "wal") {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk, busy, sync int
	if err := s.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if fk != 1 || busy != 5000 || sync != 1 {
		t.Errorf("foreign_keys=%d busy_timeout=%d synchronous=%d, want 1 5000 1(NORMAL)", fk, busy, sync)
	}
	// Every statement of the multi-statement migration ran.
	var objs int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name IN
		('sessions','links','sessions_created_at_idx','links_session_idx','schema_migrations')`).Scan(&objs); err != nil {
		t.Fatal(err)
	}
	if objs != 5 {
		t.Errorf("schema objects = %d, want 5", objs)
	}
	if err := s.CreateSession(ctx, Session{ID: "s_1", Name: "one", State: "created", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatalf("second Close: %v", err)
	}

	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("loadMigrations: %v %d", err, len(ms))
	}
	for i := 0; i < 2; i++ {
		s2 := openTest(t, path)
		var n, maxv int64
		if err := s2.db.QueryRowContext(ctx, "SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&n, &maxv); err != nil {
			t.Fatal(err)
		}
		if n != int64(len(ms)) || maxv != ms[len(ms)-1].version {
			t.Errorf("schema_migrations: %d rows max %d, want %d rows max %d", n, maxv, len(ms), ms[len(ms)-1].version)
		}
		if _, err := s2.GetSession(ctx, "s_1"); err != nil {
			t.Errorf("reopen %d: %v", i, err)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenDrivers(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "postgres", "postgres://localhost/convene")
	if err == nil || err.Error() != "catalog: driver postgres not built in yet" {
		t.Errorf("postgres: err = %v", err)
	}
	if _, err := Open(ctx, "mysql", "x"); err == nil {
		t.Error("unknown driver: want error")
	}
	// file: URI form with an existing query string.
	path := filepath.Join(t.TempDir(), "uri", "c.db")
	s, err := Open(ctx, "sqlite", "file:"+path+"?cache=private")
	if err != nil {
		t.Fatalf("file: URI: %v", err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created: %v", err)
	}
}

func TestSessionCRUD(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)

	in := Session{
		ID: "s_0123456789abcdef", Name: "Board call", State: "created",
		CreatedAt: ms(0), StartAt: ms(time.Hour), EndAt: ms(2 * time.Hour), UpdatedAt: ms(time.Second),
	}
	if err := s.CreateSession(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, in); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate CreateSession: err = %v, want ErrExists", err)
	}
	got, err := s.GetSession(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != in.ID || got.Name != in.Name || got.State != in.State {
		t.Errorf("GetSession = %+v", got)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, in.CreatedAt)
	wantTime(t, "StartAt", got.StartAt, in.StartAt)
	wantTime(t, "EndAt", got.EndAt, in.EndAt)
	wantTime(t, "UpdatedAt", got.UpdatedAt, in.UpdatedAt)

	// Zero StartAt/EndAt stay zero.
	in2 := Session{ID: "s_2", Name: "later", State: "created", CreatedAt: ms(-time.Minute), UpdatedAt: ms(-time.Minute)}
	if err := s.CreateSession(ctx, in2); err != nil {
		t.Fatal(err)
	}
	got2, err := s.GetSession(ctx, "s_2")
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "StartAt", got2.StartAt, time.Time{})
	wantTime(t, "EndAt", got2.EndAt, time.Time{})

	if _, err := s.GetSession(ctx, "s_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetSession missing: %v", err)
	}

	list, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "s_2" || list[1].ID != in.ID {
		t.Errorf("ListSessions order = %v", ids(list))
	}

	at := ms(3 * time.Hour)
	if err := s.SetSessionState(ctx, in.ID, "activated", at); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSession(ctx, in.ID)
	if got.State != "activated" {
		t.Errorf("state = %q", got.State)
	}
	wantTime(t, "UpdatedAt", got.UpdatedAt, at)
	if err := s.SetSessionState(ctx, "s_missing", "finished", at); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetSessionState missing: %v", err)
	}

	if err := s.DeleteSession(ctx, "s_2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s_2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteSession twice: %v", err)
	}
	if _, err := s.GetSession(ctx, "s_2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetSession deleted: %v", err)
	}
}

func ids(ss []Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func linkIDs(ls []Link) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func TestLinkCRUD(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for _, id := range []string{"s_a", "s_b"} {
		if err := s.CreateSession(ctx, Session{ID: id, Name: id, State: "created", CreatedAt: ms(0)}); err != nil {
			t.Fatal(err)
		}
	}
	rtp := Link{
		ID: "l_2", SessionID: "s_a", Type: "rtp", Kind: "audio", Direction: "sendrecv",
		Remote: "192.0.2.10:40000", RemoteRTCP: "192.0.2.10:40001", CreatedAt: ms(time.Second),
	}
	mc := Link{
		ID: "l_1", SessionID: "s_a", Type: "multicast", Kind: "video", Direction: "sendonly",
		Remote: "239.1.2.3:5004", RTCPMux: true, TTL: 16, Interface: "eth0", CreatedAt: ms(time.Second),
	}
	early := Link{
		ID: "l_9", SessionID: "s_b", Type: "rtp", Kind: "video", Direction: "recvonly",
		Remote: "[2001:db8::1]:5000", CreatedAt: ms(0),
	}
	for _, l := range []Link{rtp, mc, early} {
		if err := s.AddLink(ctx, l); err != nil {
			t.Fatalf("AddLink %s: %v", l.ID, err)
		}
	}
	if err := s.AddLink(ctx, rtp); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate AddLink: %v, want ErrExists", err)
	}

	got, err := s.GetLink(ctx, "l_1")
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, mc.CreatedAt)
	got.CreatedAt = mc.CreatedAt
	if got != mc {
		t.Errorf("GetLink = %+v, want %+v", got, mc)
	}
	if _, err := s.GetLink(ctx, "l_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetLink missing: %v", err)
	}

	la, err := s.ListLinks(ctx, "s_a")
	if err != nil {
		t.Fatal(err)
	}
	// Same CreatedAt: ordered by ID.
	if fmt.Sprint(linkIDs(la)) != "[l_1 l_2]" {
		t.Errorf("ListLinks(s_a) = %v", linkIDs(la))
	}
	all, err := s.ListAllLinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(linkIDs(all)) != "[l_9 l_1 l_2]" {
		t.Errorf("ListAllLinks = %v", linkIDs(all))
	}
	if none, err := s.ListLinks(ctx, "s_none"); err != nil || len(none) != 0 {
		t.Errorf("ListLinks unknown = %v, %v", none, err)
	}

	if err := s.RemoveLink(ctx, "l_2"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveLink(ctx, "l_2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveLink twice: %v", err)
	}
	la, _ = s.ListLinks(ctx, "s_a")
	if fmt.Sprint(linkIDs(la)) != "[l_1]" {
		t.Errorf("after remove: %v", linkIDs(la))
	}
}

func TestForeignKeyRefusal(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	err := s.AddLink(ctx, Link{ID: "l_x", SessionID: "s_ghost", Type: "rtp", Kind: "audio",
		Direction: "sendrecv", Remote: "192.0.2.1:4000", CreatedAt: ms(0)})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("AddLink to missing session: %v, want ErrNotFound", err)
	}
	// The constraint itself must be enforced by the database, not only by
	// AddLink's pre-check.
	_, err = s.db.ExecContext(ctx, `INSERT INTO links (`+linkCols+`) VALUES ('l_y','s_ghost','rtp','audio','sendrecv','x','',0,0,'','',0)`)
	if err == nil || !isFKViolation(err) {
		t.Errorf("raw insert with dangling session_id: err = %v, want FK violation", err)
	}
	if all, _ := s.ListAllLinks(ctx); len(all) != 0 {
		t.Errorf("links stored: %v", linkIDs(all))
	}
}

func TestCascadeDelete(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for _, id := range []string{"s_a", "s_b"} {
		if err := s.CreateSession(ctx, Session{ID: id, State: "created", CreatedAt: ms(0)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, sid := range []string{"s_a", "s_a", "s_b"} {
		if err := s.AddLink(ctx, Link{ID: fmt.Sprintf("l_%d", i), SessionID: sid, Type: "rtp", Kind: "audio",
			Direction: "sendrecv", Remote: "192.0.2.1:4000", CreatedAt: ms(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx, "s_a"); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListAllLinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(linkIDs(all)) != "[l_2]" {
		t.Errorf("after cascade: %v", linkIDs(all))
	}
	if _, err := s.GetLink(ctx, "l_0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetLink cascaded: %v", err)
	}
}

// Sessions survive a node restart: data written, store closed, reopened.
func TestSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "catalog.db")
	s := openTest(t, path)
	sess := Session{ID: "s_keep", Name: "persist", State: "activated", CreatedAt: ms(0), StartAt: ms(time.Minute), UpdatedAt: ms(time.Second)}
	link := Link{ID: "l_keep", SessionID: "s_keep", Type: "multicast", Kind: "audio", Direction: "sendonly",
		Remote: "239.1.2.3:5004", TTL: 4, Interface: "eth1", CreatedAt: ms(2 * time.Second)}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := s.AddLink(ctx, link); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The checkpoint on Close leaves nothing pending in the WAL.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("WAL not flushed on Close: %d bytes", fi.Size())
	}

	s2 := openTest(t, path)
	defer s2.Close()
	got, err := s2.GetSession(ctx, "s_keep")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != sess.Name || got.State != sess.State {
		t.Errorf("after restart: %+v", got)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, sess.CreatedAt)
	wantTime(t, "StartAt", got.StartAt, sess.StartAt)
	wantTime(t, "EndAt", got.EndAt, time.Time{})
	wantTime(t, "UpdatedAt", got.UpdatedAt, sess.UpdatedAt)
	gl, err := s2.GetLink(ctx, "l_keep")
	if err != nil {
		t.Fatal(err)
	}
	if gl.TTL != 4 || gl.Interface != "eth1" || gl.Remote != link.Remote || gl.RTCPMux {
		t.Errorf("link after restart: %+v", gl)
	}
}

func TestConcurrentCreateSession(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	const workers, per = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*per*2)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := fmt.Sprintf("s_%02d_%03d", w, i)
				if err := s.CreateSession(ctx, Session{ID: id, Name: id, State: "created", CreatedAt: ms(time.Duration(i) * time.Millisecond)}); err != nil {
					errs <- err
					continue
				}
				if err := s.AddLink(ctx, Link{ID: "l" + id, SessionID: id, Type: "rtp", Kind: "audio",
					Direction: "sendrecv", Remote: "192.0.2.1:4000"}); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != workers*per {
		t.Errorf("sessions = %d, want %d", len(list), workers*per)
	}
	links, err := s.ListAllLinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != workers*per {
		t.Errorf("links = %d, want %d", len(links), workers*per)
	}
}

// Two stores (two connections, as two processes would have) writing the same
// file concurrently rely on WAL + busy_timeout: no SQLITE_BUSY.
func TestConcurrentTwoHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	a := openTest(t, path)
	defer a.Close()
	b := openTest(t, path)
	defer b.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w, st := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func(w int, st *Store) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("s_%d_%d", w, i)
				if err := st.CreateSession(ctx, Session{ID: id, State: "created"}); err != nil {
					errs <- err
					continue
				}
				if err := st.AddLink(ctx, Link{ID: "l" + id, SessionID: id, Type: "rtp", Kind: "audio", Direction: "sendrecv", Remote: "x:1"}); err != nil {
					errs <- err
				}
			}
		}(w, st)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := b.ListSessions(ctx)
	if err != nil || len(list) != 100 {
		t.Errorf("ListSessions: %d, %v", len(list), err)
	}
}

func TestRebind(t *testing.T) {
	cases := []struct{ driver, in, want string }{
		{"sqlite", "SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = ? AND b = ?"},
		{"postgres", "SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = $1 AND b = $2"},
		{"postgres", "INSERT INTO t VALUES (?, ?, ?)", "INSERT INTO t VALUES ($1, $2, $3)"},
		{"postgres", "SELECT 1", "SELECT 1"},
		{"postgres", "SELECT '?' , \"a?\" FROM t WHERE x = ?", "SELECT '?' , \"a?\" FROM t WHERE x = $1"},
		{"postgres", "SELECT 'it''s ?' WHERE x = ?", "SELECT 'it''s ?' WHERE x = $1"},
		{"postgres", "SELECT x -- why?\nWHERE y = ?", "SELECT x -- why?\nWHERE y = $1"},
		{"postgres", "SELECT 'unterminated ?", "SELECT 'unterminated ?"},
		{"postgres", strings.Repeat("?,", 11) + "?", "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12"},
	}
	for _, c := range cases {
		if got := rebind(c.driver, c.in); got != c.want {
			t.Errorf("rebind(%s, %q) = %q, want %q", c.driver, c.in, got, c.want)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CreateSession(ctx, Session{ID: "s_c", State: "created"}); err == nil {
		t.Error("CreateSession with canceled ctx: want error")
	}
	// The store stays usable afterwards.
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
