//go:build linux

package netnstest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// childEnv marks a test binary re-executed inside a network namespace;
// outerEnv names the namespace it was started from.
const (
	childEnv = "CONVENE_NETNS_CHILD"
	outerEnv = "CONVENE_NETNS_OUTER"
)

var netnsSeq atomic.Int32

// Enter runs the calling top-level test inside a fresh network namespace in
// which multicast works on lo. Multicast on the host's loopback depends on
// the host (lo usually has no MULTICAST flag and no route for 224.0.0.0/4),
// so the test makes its own: `ip netns add`, lo up with multicast on and a
// 224.0.0.0/4 route, then re-executes the test binary for this test only
// with `ip netns exec`, streams its output and deletes the namespace.
//
// In the parent it returns false after the child has run (the parent fails
// if the child fails, skips, or does not run the test); in the child it
// returns true and the test body runs. Without root or iproute2 it fails
// under CI=true and skips, saying why, elsewhere (testutil).
func Enter(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		return true
	}
	ip := testutil.NeedBinary(t, "ip")
	testutil.NeedRoot(t, "a network namespace")
	ns := fmt.Sprintf("convene-mc-%d-%d", os.Getpid(), netnsSeq.Add(1))
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command(ip, "netns", "del", ns).Run() // a leftover from a reused pid
	run("netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "link", "set", "lo", "multicast", "on")
	run("-n", ns, "route", "add", "224.0.0.0/4", "dev", "lo")

	name := t.Name()
	args := []string{"netns", "exec", ns, os.Args[0],
		"-test.run", "^" + regexp.QuoteMeta(name) + "$", "-test.v", "-test.count", "1"}
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() != "0s" {
		args = append(args, "-test.timeout", f.Value.String())
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, ip, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	if outer, err := os.Readlink("/proc/self/ns/net"); err == nil {
		cmd.Env = append(cmd.Env, outerEnv+"="+outer)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw

	// Stream the child's output, indented so that its "=== RUN" and
	// "--- PASS" lines are not taken for the parent's.
	var (
		mu     sync.Mutex
		passed bool
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "--- PASS: "+name+" ") {
				mu.Lock()
				passed = true
				mu.Unlock()
			}
			fmt.Fprintf(os.Stdout, "    [netns %s] %s\n", ns, line)
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		t.Fatalf("test in network namespace %s failed: %v", ns, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !passed {
		t.Fatalf("test in network namespace %s did not report --- PASS: %s (skipped or not run)", ns, name)
	}
	return false
}
