// Package testutil holds the helpers that tests across packages share, so
// that each rule is written once: a missing peer program skips a test with
// its reason, except under CI where it fails it; and a condition is polled
// until it holds or a deadline passes. Only tests import it.
package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// NeedBinary returns the path of the program name on PATH. Without it the
// test is skipped with the reason (go test -v shows it), except when CI is
// "true": there scripts/install-deps.sh must have installed it, so the test
// fails instead of passing without having run.
func NeedBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed, and under CI every peer must be (scripts/install-deps.sh test or bench installs it): %v", name, err)
	}
	t.Skipf("%s is not installed (scripts/install-deps.sh test or bench installs it); under CI=true this fails", name)
	return ""
}

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test naming what it waited for once timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitUntil polls check until it returns "", and fails the test with the
// last thing check said once timeout has passed: for conditions whose
// failure is best told by what is still missing.
func WaitUntil(t testing.TB, timeout time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := check()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, last)
		}
		time.Sleep(time.Millisecond)
	}
}

// NeedRoot is NeedBinary's rule for tests that need root (network
// namespaces, eBPF): without it the test fails under CI=true, where make
// test runs as root, and skips with why elsewhere.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s needs root, and CI runs make test as root; euid is %d", why, os.Geteuid())
	}
	t.Skipf("%s needs root (euid %d); under CI=true this fails", why, os.Geteuid())
}

// Buffer is a bytes.Buffer safe for concurrent use: the output of a
// process, or of loggers, that a test reads while they write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
