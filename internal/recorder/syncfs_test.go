package recorder

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFSSyncCoalesces: callers that arrive while a round runs all wait for
// one more round, which begins after them; none is served by the round
// that began before it asked.
func TestFSSyncCoalesces(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rounds atomic.Int32
	hold := make(chan struct{})
	began := make(chan struct{}, 10)
	syncfsCall = func(f *os.File) error {
		rounds.Add(1)
		began <- struct{}{}
		<-hold
		return syncfs(f)
	}
	defer func() { syncfsCall = syncfs }()
	s := &fsSync{}
	s.cond = sync.NewCond(&s.mu)

	first := make(chan error, 1)
	go func() { first <- s.sync(f) }()
	<-began // round 1 runs
	const n = 8
	var done atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.sync(f); err != nil {
				t.Error(err)
			}
			done.Add(1)
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them all wait on round 1
	hold <- struct{}{}                // round 1 ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-began // round 2, for the eight
	if d := done.Load(); d != 0 {
		t.Fatalf("%d callers returned on the round that began before they asked", d)
	}
	hold <- struct{}{}
	wg.Wait()
	if r := rounds.Load(); r != 2 {
		t.Fatalf("rounds = %d, want 2 (one, then one for all eight waiting)", r)
	}
}

// TestFSSyncReportsAFailedRound: a failed round fails the call it served;
// a later round that succeeds serves the next call.
func TestFSSyncReportsAFailedRound(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bad := errors.New("EIO")
	fail := true
	syncfsCall = func(f *os.File) error {
		if fail {
			return bad
		}
		return syncfs(f)
	}
	defer func() { syncfsCall = syncfs }()
	s := &fsSync{}
	s.cond = sync.NewCond(&s.mu)
	if err := s.sync(f); !errors.Is(err, bad) {
		t.Fatalf("err = %v, want %v", err, bad)
	}
	fail = false
	if err := s.sync(f); err != nil {
		t.Fatalf("after a good round: err = %v", err)
	}
}

// TestFSSyncForSharesByDevice: files of one file system share a syncer,
// and a real syncfs succeeds.
func TestFSSyncForSharesByDevice(t *testing.T) {
	dir := t.TempDir()
	a, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sa, err := fsSyncFor(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := fsSyncFor(b)
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb {
		t.Fatal("two files of one directory got different syncers")
	}
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sa.sync(a); err != nil {
		t.Fatal(err)
	}
}
