package recorder

import (
	"fmt"
	"os"
	"sync/atomic"
)

// syncer fsyncs a recording's files on a goroutine of its own, so that
// the writer goes on draining the queue while the disk commits: an fsync
// waits for the file's dirty pages and the file system's journal, which
// with many recordings syncing at once takes longer than the queue holds
// (at 100 streams of 5 Mb/s, 20 recordings of 5, writers that synced
// inline dropped packets with the disk far from full). The writer hands
// it the files written since their last sync every SyncEvery
// (requestSync); a request while the last is still running waits for the
// next tick, so a slow disk delays durability and does not pile up work.
// Files are closed only after stopSync.
type syncer struct {
	r    *Recording
	req  chan []syncJob
	done chan struct{}
	err  atomic.Pointer[error] // the first failed fsync
}

// syncJob is one file to fsync and, for a stream, the bytes written to
// it before the request (its synced count once the fsync returns).
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
		for _, j := range jobs {
			if err := j.f.Sync(); err != nil {
				err = fmt.Errorf("recorder: syncing %s: %w", j.name, err)
				y.err.CompareAndSwap(nil, &err)
				break
			}
			y.r.fsyncs.Add(1)
			if j.s != nil {
				j.s.didSync(j.n)
			}
		}
	}
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
