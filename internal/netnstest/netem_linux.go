//go:build linux

package netnstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

var netemProbe struct {
	once sync.Once
	err  error
}

// NetemAvailable reports why Netem cannot be used here, or nil if it can:
// it needs root, tc (iproute2) and a kernel with sch_netem (built in or
// loadable; some kernels have neither). It probes once per process, in a
// throwaway namespace. Inside Enter's namespace it is nil: the parent
// probed before entering. A test without netem injects its delay and loss
// itself and says so.
func NetemAvailable() error {
	if os.Getenv(childEnv) != "" {
		return nil
	}
	netemProbe.once.Do(func() { netemProbe.err = probeNetem() })
	return netemProbe.err
}

func probeNetem() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	tc, err := exec.LookPath("tc")
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("convene-netem-probe-%d", os.Getpid())
	_ = exec.Command(ip, "netns", "del", ns).Run()
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command(ip, "netns", "del", ns).Run()
	out, err := exec.Command(ip, "netns", "exec", ns, tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil {
		return fmt.Errorf("the kernel has no netem qdisc (sch_netem): tc: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Netem makes every packet on lo go through `tc qdisc … netem args…`
// (delay, jitter, loss, as tc-netem(8) reads them), replacing what lo had,
// until the test ends. It works only inside Enter's namespace, so that a
// test can never slow the host's own loopback: anywhere else it fails the
// test. A packet between two local sockets crosses lo once, so a delay is
// per direction, not per round trip.
func Netem(t *testing.T, args ...string) {
	t.Helper()
	if os.Getenv(childEnv) == "" || !inOwnNetns() {
		t.Fatal("netnstest.Netem outside the test's own network namespace (call Enter first)")
	}
	tc, err := exec.LookPath("tc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := append([]string{"qdisc", "replace", "dev", "lo", "root", "netem"}, args...)
	if out, err := exec.Command(tc, cmd...).CombinedOutput(); err != nil {
		t.Fatalf("tc %s: %v\n%s", strings.Join(cmd, " "), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(tc, "qdisc", "del", "dev", "lo", "root").CombinedOutput(); err != nil {
			t.Errorf("tc qdisc del dev lo root: %v\n%s", err, out)
		}
	})
}

// inOwnNetns reports whether this process is in another network namespace
// than the test process that entered it (Enter passes its own in outerEnv;
// /proc/1's may not be readable).
func inOwnNetns() bool {
	self, err := os.Readlink("/proc/self/ns/net")
	outer := os.Getenv(outerEnv)
	return err == nil && outer != "" && self != outer
}
