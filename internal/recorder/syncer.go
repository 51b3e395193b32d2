package recorder

import (
	"fmt"
	"os"
	"sync/atomic"
)

// syncer makes a recording's files durable on a goroutine of its own, so
// that the writer goes on draining the queue while the disk commits: a
// sync waits for the files' dirty pages and the disk's cache flush, which
// with many recordings takes longer than the queue holds (at 100 streams
// of 5 Mb/s, 20 recordings of 5, writers that synced inline dropped
// packets with the disk far from full). The writer hands it the files
// written since their last sync every SyncEvery (requestSync); a request
// while the last is still running waits for the next tick, so a slow disk
// delays durability and does not pile up work. One syncfs round of the
// file system (fsSync, shared with every other recording on it) covers
// the request's files. Files are closed only after stopSync.
type syncer struct {
	r    *Recording
	req  chan []syncJob
	done chan struct{}
	err  atomic.Pointer[error] // the first failed sync
	fs   *fsSync               // the file system's, once known
}

// syncJob is one file to sync and, for a stream, the bytes written to it
// before the request (its synced count once the sync returns).
type syncJob struct {
	f    *os.File
	name string
	s    *stream // nil for the time line
	n    int64
}

func (w *writer) startSync() {
	w.syncs = &syncer{r: w.r, req: make(chan []syncJob, 1), done: make(chan struct{})}
	go w.syncs.run()
}

func (y *syncer) run() {
	defer close(y.done)
	for jobs := range y.req {
		if err := y.sync(jobs); err != nil {
			y.err.CompareAndSwap(nil, &err)
			continue
		}
		for _, j := range jobs {
			y.r.fsyncs.Add(1)
			if j.s != nil {
				j.s.didSync(j.n)
			}
		}
	}
}

// sync makes the jobs' files durable: by a syncfs round of their file
// system, or, where the file system's syncer cannot be had, by an fsync
// of each.
func (y *syncer) sync(jobs []syncJob) error {
	if len(jobs) == 0 {
		return nil
	}
	if y.fs == nil {
		y.fs, _ = fsSyncFor(jobs[0].f)
	}
	if y.fs != nil {
		if err := y.fs.sync(jobs[0].f); err != nil {
			return fmt.Errorf("recorder: syncing %s: %w", y.r.dir, err)
		}
		return nil
	}
	for _, j := range jobs {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("recorder: syncing %s: %w", j.name, err)
		}
	}
	return nil
}

// requestSync hands the syncer the files written since their last sync,
// unless it is still busy with the last request; and takes up an error
// it had.
func (w *writer) requestSync() {
	if e := w.syncs.err.Load(); e != nil {
		w.err = *e
		return
	}
	var jobs []syncJob
	for _, s := range w.list {
		if n := s.w.Written(); n != s.synced.Load() {
			jobs = append(jobs, syncJob{f: s.f, name: s.side.File, s: s, n: n})
		}
	}
	jobs = append(jobs, syncJob{f: w.events, name: EventsFile})
	select {
	case w.syncs.req <- jobs:
	default: // still syncing: the next tick takes these too
	}
}

// stopSync waits for the syncer's last request and ends it; the writer
// syncs (sync) itself from then on.
func (w *writer) stopSync() {
	if w.syncs == nil {
		return
	}
	close(w.syncs.req)
	<-w.syncs.done
	if e := w.syncs.err.Load(); e != nil && w.err == nil {
		w.err = *e
	}
	w.syncs = nil
}
