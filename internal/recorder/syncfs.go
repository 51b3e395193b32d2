package recorder

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// fsSync makes one syncfs(2) serve every recording on a file system that
// asks for a sync meanwhile (a group commit). A recording's syncer used to
// fsync each of its files: a hundred audio recordings of ten streams made
// 550 fsyncs a second, each a disk cache flush, and each a system call
// that blocks. The Go runtime takes a blocked thread's processor back
// only when its monitor next looks (20 µs to 10 ms), so on a node pinned
// to one CPU every blocking fsync stalled the media goroutines: with them
// the recording benchmark's live listeners saw the node's own queueing
// reach 100–500 ms at 1,000 streams, and under 5 ms without. One syncfs
// writes back and flushes every file of the file system, the recordings'
// among them, so a round that starts after a request covers everything
// written before it.
//
// A round's error (a write-back error on the file system, which syncfs
// reports without saying which file) is its waiters'. The kernel reports
// such an error to each descriptor opened before it, once: a later round
// through another older recording's file reports it again.
type fsSync struct {
	mu       sync.Mutex
	cond     *sync.Cond
	started  uint64 // rounds begun; one runs while started > finished
	finished uint64 // rounds ended
	failed   uint64 // the last round that failed (0: none)
	err      error  // its error
}

// fsSyncs are the file systems' syncers, by device.
var fsSyncs = struct {
	sync.Mutex
	m map[uint64]*fsSync
}{m: map[uint64]*fsSync{}}

// fsSyncFor returns the syncer of the file system f is on.
func fsSyncFor(f *os.File) (*fsSync, error) {
	var st unix.Stat_t
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	fsSyncs.Lock()
	defer fsSyncs.Unlock()
	s := fsSyncs.m[st.Dev]
	if s == nil {
		s = &fsSync{}
		s.cond = sync.NewCond(&s.mu)
		fsSyncs.m[st.Dev] = s
	}
	return s, nil
}

// sync returns once a syncfs that began after the call has ended, making
// it through f if no round is running.
func (s *fsSync) sync(f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.started + 1 // a running round began before this call
	for s.finished < want {
		if s.started > s.finished { // a round runs
			s.cond.Wait()
			continue
		}
		s.started++
		round := s.started
		s.mu.Unlock()
		err := syncfsCall(f)
		s.mu.Lock()
		s.finished = round
		if err != nil {
			s.failed, s.err = round, err
		}
		s.cond.Broadcast()
	}
	if s.failed >= want { // a round that served this call failed
		return s.err
	}
	return nil
}

// syncfsCall is syncfs; a test counts and holds the rounds through it.
var syncfsCall = syncfs

func syncfs(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("syncfs: %w", serr)
	}
	return nil
}
