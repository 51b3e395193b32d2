package ffmpeg

import (
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestProcRestarts: a child that prints progress lines beats; killed, it
// is started again with a new PID; Stop ends it for good.
func TestProcRestarts(t *testing.T) {
	sh := testutil.NeedBinary(t, "sh")
	p := Start(ProcOptions{Name: "test", Path: sh, Grace: time.Millisecond,
		Args: func() []string { return []string{"-c", "while :; do echo progress=continue >&3; sleep 0.05; done"} }})
	defer p.Stop()
	testutil.WaitFor(t, 5*time.Second, "beats", func() bool { return p.Beats() > 5 })
	pid := p.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a new child", func() bool { return p.PID() != 0 && p.PID() != pid })
	if p.Starts() != 2 {
		t.Errorf("%d starts, want 2", p.Starts())
	}
	b := p.Beats()
	testutil.WaitFor(t, 5*time.Second, "the new child's beats", func() bool { return p.Beats() > b+3 })
	p.Kill() // what the supervisor does to a child that stopped beating
	testutil.WaitFor(t, 5*time.Second, "a third child", func() bool { return p.Starts() == 3 && p.PID() != 0 })
	p.Stop()
	if p.PID() != 0 {
		t.Errorf("a child runs after Stop: %d", p.PID())
	}
}
