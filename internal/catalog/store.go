// Package catalog is the SQL catalog of Convene sessions and their media
// links. It persists what a node needs to rebuild its state after a
// restart: which sessions exist, their lifecycle state and schedule, and the
// RTP / multicast links attached to each of them.
//
// The catalog is opened with Open. Two drivers are built in: "sqlite" (pure
// Go, modernc.org/sqlite; the default, one node) and "postgres" (pgx through
// its database/sql adapter; several nodes sharing one catalog). Both take
// the same code path: all SQL, migrations included, is portable — standard
// column types, timestamps as BIGINT unix milliseconds UTC, booleans as
// INTEGER 0/1, and '?' placeholders rebound per driver — and each driver's
// constraint errors map to the same ErrExists and ErrNotFound.
package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
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
	dsn    string // sqlite: the full DSN, for the checkpointer; postgres: empty (it may hold a password)

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
//
// For driver "postgres", dsn is a PostgreSQL connection URL
// (postgres://user:password@host:5432/db?sslmode=…) or key=value string, as
// pgx parses it; the database must exist. Errors never repeat the DSN, which
// may hold a password.
func Open(ctx context.Context, driver, dsn string) (*Store, error) {
	var (
		s   *Store
		err error
	)
	switch driver {
	case driverSQLite:
		s, err = openSQLite(dsn)
	case driverPostgres:
		s, err = openPostgres(dsn)
	default:
		return nil, fmt.Errorf("catalog: unknown driver %q", driver)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("catalog: open: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	if s.driver == driverSQLite && !inMemory(s.dsn) {
		if s.ckpt, err = startCheckpointer(s.dsn); err != nil {
			s.db.Close()
			return nil, fmt.Errorf("catalog: open: %w", err)
		}
	}
	return s, nil
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

// isFKViolation reports whether err is a foreign key constraint failure,
// from either driver.
func isFKViolation(err error) bool {
	return sqliteFKViolation(err) || postgresFKViolation(err)
}

// isUniqueViolation reports whether err is a primary key / unique failure,
// from either driver.
func isUniqueViolation(err error) bool {
	return sqliteUniqueViolation(err) || postgresUniqueViolation(err)
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
