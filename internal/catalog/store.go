// Package catalog is the SQL catalog of Convene sessions and their media
// links. It persists what a node needs to rebuild its state after a
// restart: which sessions exist, their lifecycle state and schedule, and the
// RTP / multicast links attached to each of them.
//
// The catalog is opened with Open. The "sqlite" driver (pure Go,
// modernc.org/sqlite) is built in; "postgres" is reserved. All SQL is kept
// portable: standard column types, timestamps as BIGINT unix milliseconds
// UTC, and '?' placeholders rebound per driver.
package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sentinel errors, usable with errors.Is.
var (
	// ErrNotFound reports that the session or link does not exist.
	ErrNotFound = errors.New("catalog: not found")
	// ErrExists reports that a session or link with that ID already exists.
	ErrExists = errors.New("catalog: already exists")
)

const (
	driverSQLite   = "sqlite"
	driverPostgres = "postgres"
)

// Store is a handle on the catalog database. It is safe for concurrent use.
type Store struct {
	db     *sql.DB
	driver string

	ckpt      *checkpointer // sqlite files: WAL checkpoints in the background (checkpoint.go)
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the catalog at dsn and applies any
// pending migrations.
//
// For driver "sqlite", dsn is a file path or a "file:" URI; the parent
// directory is created if missing. The connection runs with WAL journaling,
// busy_timeout=5000, foreign_keys=ON and synchronous=NORMAL, and the pool is
// limited to a single connection (SQLite serializes writes anyway).
// Driver "postgres" is not built in yet.
func Open(ctx context.Context, driver, dsn string) (*Store, error) {
	switch driver {
	case driverSQLite:
	case driverPostgres:
		return nil, errors.New("catalog: driver postgres not built in yet")
	default:
		return nil, fmt.Errorf("catalog: unknown driver %q", driver)
	}

	full, err := sqliteDSN(dsn)
	if err != nil {
		return nil, err
	}
	own := full
	if !inMemory(full) {
		own = withoutAutoCheckpoint(full) // checkpoint.go runs them instead
	}
	db, err := sql.Open("sqlite", own)
	if err != nil {
		return nil, fmt.Errorf("catalog: open: %w", err)
	}
	// One connection: writes serialize in SQLite anyway, and a single
	// connection rules out SQLITE_BUSY between our own goroutines.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)

	s := &Store{db: db, driver: driver}
	if err := s.Ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("catalog: open: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if !inMemory(full) {
		if s.ckpt, err = startCheckpointer(full); err != nil {
			db.Close()
			return nil, fmt.Errorf("catalog: open: %w", err)
		}
	}
	return s, nil
}

// sqliteDSN turns a path or file: URI into a modernc.org/sqlite DSN carrying
// the connection pragmas, creating the database's parent directory.
func sqliteDSN(dsn string) (string, error) {
	if dsn == "" {
		return "", errors.New("catalog: open: empty sqlite dsn")
	}
	path, query, _ := strings.Cut(dsn, "?")
	path = strings.TrimPrefix(path, "file:")
	if path != "" && path != ":memory:" && !strings.HasPrefix(path, ":memory:") {
		if dir := filepath.Dir(path); dir != "" && dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return "", fmt.Errorf("catalog: open: create directory: %w", err)
			}
		}
		if err := private(path); err != nil {
			return "", fmt.Errorf("catalog: open: %w", err)
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("catalog: open: bad dsn query: %w", err)
	}
	// busy_timeout is applied first by the driver regardless of order.
	for _, p := range []string{
		"busy_timeout(5000)",
		"journal_mode(WAL)",
		"foreign_keys(ON)",
		"synchronous(NORMAL)",
	} {
		q.Add("_pragma", p)
	}
	if q.Get("_txlock") == "" {
		// Take the write lock at BEGIN so transactions from other
		// processes wait on busy_timeout instead of failing on upgrade.
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode(), nil
}

// private makes the database file (and any -wal, -shm left from before)
// readable by the node's user only: it holds HA1 digests, which are as good
// as passwords for SIP. SQLite gives the WAL and shared-memory files it
// creates the database file's mode, so creating the file 0600 first is
// enough for them.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Ping checks that the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("catalog: ping: %w", err)
	}
	return nil
}

// Close flushes the WAL into the main database file (sqlite) and closes the
// store. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.ckpt != nil {
			s.ckpt.close()
		}
		if s.driver == driverSQLite {
			if _, err := s.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				errs = append(errs, fmt.Errorf("catalog: close: checkpoint: %w", err))
			}
		}
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("catalog: close: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// rebind rewrites '?' placeholders for the driver: unchanged for sqlite,
// $1..$n for postgres. Question marks inside quoted strings, quoted
// identifiers and comments are left alone.
func rebind(driver, query string) string {
	if driver != driverPostgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			// Copy through the closing quote; doubled quotes ('') are
			// handled as close+reopen.
			j := strings.IndexByte(query[i+1:], c)
			if j < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+j+2])
			i += j + 1
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+j+1])
			i += j
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// q returns query rebound for the store's driver.
func (s *Store) q(query string) string { return rebind(s.driver, query) }

// isFKViolation reports whether err is a foreign key constraint failure.
func isFKViolation(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// isUniqueViolation reports whether err is a primary key / unique failure.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) &&
		(se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
}

// toMillis converts t to unix milliseconds; the zero time maps to NULL.
func toMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMillis converts unix milliseconds to a UTC time; NULL maps to zero.
func fromMillis(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// rowScanner is satisfied by *sql.Row and *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}
