package sip

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// runSIPp runs SIPp against the server until it has done calls calls. SIPp
// traces its messages and errors into its own directory; when it fails, the
// traces follow its output. When ctx ends SIPp is asked to stop (SIGUSR1 twice: it
// quits and flushes its screen) and killed 2 s later.
func runSIPp(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	bin := testutil.NeedBinary(t, "sipp")
	cmd := exec.CommandContext(ctx, bin, append(args, "-trace_msg")...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error {
		// One SIGUSR1 waits for open calls; a second makes SIPp quit now.
		cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(50 * time.Millisecond)
		return cmd.Process.Signal(syscall.SIGUSR1)
	}
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(cmd.Dir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&out, "\n--- %s\n%s", filepath.Base(l), b)
		}
	}
	return out.String(), err
}

func scenario(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", "sipp", name))
	return p
}

// TestSIPpRegisterNonceReuse: SIPp registers with [authentication] and
// then re-registers twice reusing the nonce; a second 401 would fail the
// scenario ("unexpected message").
func TestSIPpRegisterNonceReuse(t *testing.T) {
	for _, transport := range []string{"u1", "t1"} {
		t.Run(transport, func(t *testing.T) {
			e := newTestEnv(t, nil, "alice")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := runSIPp(t, ctx, "-sf", scenario("reg_reuse.xml"), "-i", "127.0.0.1", "-p", strconv.Itoa(freeUDPPort(t)),
				"-t", transport, "-s", "alice", "-au", "alice", "-ap", testPassword, "-m", "1", "-timeout", "20s",
				"-nostdin", "-trace_err", e.srv.Addr())
			if err != nil {
				t.Fatalf("sipp: %v\n%s", err, out)
			}
			if got := counter(t, e.reg, "convene_sip_challenges_total", nil); got != 1 {
				t.Errorf("challenges = %v, want 1 (nonce reuse must not be challenged)", got)
			}
			if got := counter(t, e.reg, "convene_sip_registers_total", map[string]string{"result": "ok"}); got != 3 {
				t.Errorf("registers ok = %v, want 3", got)
			}
			bs := e.srv.loc.lookup("alice", time.Now())
			if len(bs) != 1 || !strings.Contains(bs[0].contact, "alice@127.0.0.1") {
				t.Errorf("bindings = %+v", bs)
			}
		})
	}
}
