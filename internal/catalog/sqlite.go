package catalog

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// openSQLite opens the SQLite file (or in-memory database) dsn names, with
// one connection: writes serialize in SQLite anyway, and a single
// connection rules out SQLITE_BUSY between our own goroutines.
func openSQLite(dsn string) (*Store, error) {
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
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &Store{db: db, driver: driverSQLite, dsn: full}, nil
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

// sqliteConstraint reports whether err is a SQLite constraint failure with
// one of codes.
func sqliteConstraint(err error, codes ...int) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range codes {
		if se.Code() == c {
			return true
		}
	}
	return false
}

func sqliteFKViolation(err error) bool {
	return sqliteConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY)
}

func sqliteUniqueViolation(err error) bool {
	return sqliteConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE)
}
