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

	"github.com/convene/convene/internal/testutil"
)

// backend is one driver the catalog's tests run against.
type backend struct {
	driver string
	// dsn names a new, empty database for t; opening it again reaches
	// the same data.
	dsn func(t *testing.T) string
}

// pg is the PostgreSQL server the package's tests share, started on first
// use and stopped by TestMain: one initdb for the suite, a database a test.
var pg struct {
	once sync.Once
	srv  *testutil.Postgres
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.srv != nil {
		if err := pg.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sqliteBackend() backend {
	return backend{driver: "sqlite", dsn: func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "sub", "dir", "catalog.db") // parent dirs created by Open
	}}
}

// postgresBackend starts the shared server if needed. Without PostgreSQL's
// binaries the test is skipped, saying so (under CI=true it fails).
func postgresBackend(t *testing.T) backend {
	t.Helper()
	testutil.NeedPostgresBinaries(t)
	pg.once.Do(func() { pg.srv, pg.err = testutil.StartPostgres() })
	if pg.err != nil {
		t.Fatalf("start PostgreSQL: %v", pg.err)
	}
	return backend{driver: "postgres", dsn: func(t *testing.T) string {
		dsn, err := pg.srv.CreateDatabase(t.Name())
		if err != nil {
			t.Fatal(err)
		}
		return dsn
	}}
}

// forDrivers runs test once per driver, as subtests named after them.
func forDrivers(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) { test(t, sqliteBackend()) })
	t.Run("postgres", func(t *testing.T) { test(t, postgresBackend(t)) })
}

func openTest(t *testing.T, b backend, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), b.driver, dsn)
	if err != nil {
		t.Fatalf("Open(%s): %v", b.driver, err)
	}
	return s
}

// newStore opens a store on a new database, closed when t ends, and
// returns the DSN to reopen it.
func newStore(t *testing.T, b backend) (*Store, string) {
	t.Helper()
	dsn := b.dsn(t)
	s := openTest(t, b, dsn)
	t.Cleanup(func() { s.Close() })
	return s, dsn
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

func TestOpenPragmas(t *testing.T) {
	ctx := context.Background()
	b := sqliteBackend()
	s, _ := newStore(t, b)
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
}

// schemaObjects is the query counting tables and indexes by name.
var schemaObjects = map[string]string{
	"sqlite":   "SELECT COUNT(*) FROM sqlite_master WHERE name IN ",
	"postgres": "SELECT COUNT(*) FROM pg_class WHERE relname IN ",
}

func TestMigrationsIdempotent(t *testing.T) { forDrivers(t, testMigrationsIdempotent) }

func testMigrationsIdempotent(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.dsn(t)
	s := openTest(t, b, dsn)

	// Every statement of the multi-statement migrations ran.
	var objs int
	if err := s.db.QueryRowContext(ctx, schemaObjects[b.driver]+`('sessions','links','sessions_created_at_idx',
		'links_session_idx','schema_migrations','recordings_started_idx','sip_bindings_expires_idx')`).Scan(&objs); err != nil {
		t.Fatal(err)
	}
	if objs != 6 { // sip_bindings_expires_idx was dropped by 0007
		t.Errorf("schema objects = %d, want 6", objs)
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
		s2 := openTest(t, b, dsn)
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

// Two nodes starting together on one new database both migrate it; each
// migration is applied once and neither fails.
func TestConcurrentMigrate(t *testing.T) {
	b := postgresBackend(t)
	dsn := b.dsn(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), b.driver, dsn)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
}

func TestOpenDrivers(t *testing.T) {
	ctx := context.Background()
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

// A PostgreSQL DSN carries a password: no error repeats it, whether the
// DSN does not parse or the server cannot be reached.
func TestPostgresDSNNotShown(t *testing.T) {
	ctx := context.Background()
	const secret = "s3cr3t-pa55"
	for _, dsn := range []string{
		"postgres://convene:" + secret + "@localhost:notaport/convene",
		"postgres://convene:" + secret + "@%zz/convene",
		"host=localhost password=" + secret + " port=x",
		"",
	} {
		_, err := Open(ctx, "postgres", dsn)
		if !errors.Is(err, ErrBadDSN) {
			t.Errorf("Open(bad dsn): err = %v, want ErrBadDSN", err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
	for _, dsn := range []string{
		"postgres://convene:" + secret + "@db.example:5432/convene?sslmode=verify-full",
		"host=db.example dbname=convene user=convene password=" + secret,
	} {
		if _, err := postgresConfig(dsn); err != nil {
			t.Errorf("a good DSN: %v", err)
		}
	}
	// A socket directory with no server in it: the connection fails.
	nowhere := "postgres://convene:" + secret + "@/convene?host=" + t.TempDir() + "&connect_timeout=5"
	_, err := Open(ctx, "postgres", nowhere)
	if err == nil {
		t.Fatal("Open with no server: want error")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error shows the password: %v", err)
	}
}

// PostgreSQL's constraint errors map to the same sentinels as SQLite's.
func TestPostgresErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, postgresBackend(t))
	_, err := s.db.ExecContext(ctx, `INSERT INTO links (`+linkCols+`) VALUES ('l_y','s_ghost','rtp','audio','sendrecv','x','',0,0,'','','',0)`)
	if !isFKViolation(err) || isUniqueViolation(err) {
		t.Errorf("dangling session_id: err = %v, want only an FK violation", err)
	}
	for i := 0; i < 2; i++ {
		_, err = s.db.ExecContext(ctx, `INSERT INTO sessions (id, name, state, created_at, updated_at) VALUES ('s_d', '', 'created', 0, 0)`)
	}
	if !isUniqueViolation(err) || isFKViolation(err) {
		t.Errorf("duplicate session: err = %v, want only a unique violation", err)
	}
}

func TestSessionCRUD(t *testing.T) { forDrivers(t, testSessionCRUD) }

func testSessionCRUD(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)

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

func TestLinkCRUD(t *testing.T) { forDrivers(t, testLinkCRUD) }

func testLinkCRUD(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
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

func TestForeignKeyRefusal(t *testing.T) { forDrivers(t, testForeignKeyRefusal) }

func testForeignKeyRefusal(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
	err := s.AddLink(ctx, Link{ID: "l_x", SessionID: "s_ghost", Type: "rtp", Kind: "audio",
		Direction: "sendrecv", Remote: "192.0.2.1:4000", CreatedAt: ms(0)})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("AddLink to missing session: %v, want ErrNotFound", err)
	}
	// The constraint itself must be enforced by the database, not only by
	// AddLink's pre-check.
	_, err = s.db.ExecContext(ctx, `INSERT INTO links (`+linkCols+`) VALUES ('l_y','s_ghost','rtp','audio','sendrecv','x','',0,0,'','','',0)`)
	if err == nil || !isFKViolation(err) {
		t.Errorf("raw insert with dangling session_id: err = %v, want FK violation", err)
	}
	if all, _ := s.ListAllLinks(ctx); len(all) != 0 {
		t.Errorf("links stored: %v", linkIDs(all))
	}
}

func TestCascadeDelete(t *testing.T) { forDrivers(t, testCascadeDelete) }

func testCascadeDelete(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
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
func TestSurvivesRestart(t *testing.T) { forDrivers(t, testSurvivesRestart) }

func testSurvivesRestart(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.dsn(t)
	s := openTest(t, b, dsn)
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
	if fi, err := os.Stat(dsn + "-wal"); b.driver == "sqlite" && err == nil && fi.Size() != 0 {
		t.Errorf("WAL not flushed on Close: %d bytes", fi.Size())
	}

	s2 := openTest(t, b, dsn)
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

func TestConcurrentCreateSession(t *testing.T) { forDrivers(t, testConcurrentCreateSession) }

func testConcurrentCreateSession(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
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
// database concurrently: SQLite relies on WAL + busy_timeout (no
// SQLITE_BUSY), PostgreSQL on its own concurrency (two nodes of a cluster).
func TestConcurrentTwoHandles(t *testing.T) { forDrivers(t, testConcurrentTwoHandles) }

func testConcurrentTwoHandles(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.dsn(t)
	a := openTest(t, b, dsn)
	defer a.Close()
	c := openTest(t, b, dsn)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w, st := range []*Store{a, c, a, c} {
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
	list, err := c.ListSessions(ctx)
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

func TestCanceledContext(t *testing.T) { forDrivers(t, testCanceledContext) }

func testCanceledContext(t *testing.T, b backend) {
	s, _ := newStore(t, b)
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
