package catalog

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations, ordered by version. File
// names must start with a decimal version, e.g. "0001_init.sql".
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("catalog: migrations: %w", err)
	}
	var ms []migration
	seen := map[int64]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			num = strings.TrimSuffix(name, ".sql")
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("catalog: migrations: bad file name %q", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("catalog: migrations: %q and %q share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, fmt.Errorf("catalog: migrations: %w", err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrateLock is the key of the PostgreSQL advisory lock that migrations
// run under ("convene" in ASCII), so that nodes starting together on one
// database apply each migration once: without it, two transactions both
// see a version missing (READ COMMITTED) and the second fails on the
// first's CREATE TABLE. SQLite needs no lock: its transactions take the
// write lock at BEGIN (_txlock=immediate), one at a time.
const migrateLock = 0x636f6e76656e65

// migrate creates schema_migrations and applies every pending migration,
// each in its own transaction together with its schema_migrations row.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx) // the advisory lock belongs to a connection
	if err != nil {
		return fmt.Errorf("catalog: migrate: %w", err)
	}
	defer conn.Close()
	if s.driver == driverPostgres {
		if _, err := conn.ExecContext(ctx, s.q("SELECT pg_advisory_lock(?)"), int64(migrateLock)); err != nil {
			return fmt.Errorf("catalog: migrate: lock: %w", err)
		}
		// Unlocked even when ctx has ended; closing the connection
		// would release it too, but database/sql keeps it in the pool.
		defer conn.ExecContext(context.Background(), s.q("SELECT pg_advisory_unlock(?)"), int64(migrateLock)) //nolint:errcheck
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT NOT NULL PRIMARY KEY,
    applied_at BIGINT NOT NULL
)`); err != nil {
		return fmt.Errorf("catalog: migrate: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := s.applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("catalog: migrate %s: %w", m.name, err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, conn *sql.Conn, m migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit

	// Checked inside the transaction so that two processes opening the
	// same database cannot both apply a migration.
	var v int64
	err = tx.QueryRowContext(ctx, s.q("SELECT version FROM schema_migrations WHERE version = ?"), m.version).Scan(&v)
	switch {
	case err == nil:
		return nil // already applied
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"),
		m.version, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}
