package catalog

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// checkpointEvery is how often the background checkpointer runs.
const checkpointEvery = 500 * time.Millisecond

// checkpointer keeps SQLite's WAL checkpoints, and their fsyncs, off the
// write path. SQLite's default runs a checkpoint inside whichever commit
// pushes the WAL past 1000 pages; on a VM with a busy disk that one commit
// (say, a session create) then waits 40 ms to over a second for fsync. The
// store's own connection runs with wal_autocheckpoint=0 and this second
// connection runs PASSIVE checkpoints, which never wait for and never block
// the writer. Durability is unchanged: synchronous=NORMAL, as before.
type checkpointer struct {
	db   *sql.DB
	stop chan struct{}
	done chan struct{}
}

// withoutAutoCheckpoint adds wal_autocheckpoint(0) to a DSN from sqliteDSN.
func withoutAutoCheckpoint(dsn string) string {
	return dsn + "&_pragma=wal_autocheckpoint%280%29"
}

// inMemory reports whether a DSN from sqliteDSN names an in-memory database,
// which has no WAL and must not be opened twice.
func inMemory(dsn string) bool {
	return strings.HasPrefix(dsn, "file::memory:") || strings.Contains(dsn, "mode=memory")
}

func startCheckpointer(dsn string) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// Errors are not fatal: the next tick tries again, and Close
			// checkpoints on the store's own connection.
			_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

func (c *checkpointer) close() {
	close(c.stop)
	<-c.done
	c.db.Close()
}
