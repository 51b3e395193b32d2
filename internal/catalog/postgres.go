package catalog

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL error codes (SQLSTATE, appendix A of the PostgreSQL manual).
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// postgresConns caps the pool: the catalog is off the media path and a
// node's writes are small, while a PostgreSQL server shared by a cluster
// has max_connections (100 by default) for all of its nodes.
const postgresConns = 8

// ErrBadDSN reports a PostgreSQL DSN that does not parse. Its message never
// repeats the DSN: that may hold a password.
var ErrBadDSN = errors.New("catalog: postgres dsn does not parse as a postgres:// URL or key=value string (not shown: it may hold a password)")

// postgresConfig parses dsn as pgx does, without connecting. Its error is
// ErrBadDSN, never the parser's own, whose masking of passwords is best
// effort.
func postgresConfig(dsn string) (*pgx.ConnConfig, error) {
	if dsn == "" {
		return nil, ErrBadDSN
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, ErrBadDSN
	}
	return cfg, nil
}

// openPostgres opens a pool on the PostgreSQL database dsn names. Nothing
// connects until the first query (Open pings).
func openPostgres(dsn string) (*Store, error) {
	cfg, err := postgresConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(postgresConns)
	db.SetMaxIdleConns(postgresConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return &Store{db: db, driver: driverPostgres}, nil
}

func postgresCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func postgresFKViolation(err error) bool { return postgresCode(err) == pgForeignKeyViolation }

func postgresUniqueViolation(err error) bool { return postgresCode(err) == pgUniqueViolation }
