package ffmpeg

import (
	"sync/atomic"
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

// TestProcRekey: while a child has made no frame, CheckKeyframes calls
// Rekey once KeyAgain has passed since its start, and again KeyAgain after
// that, not sooner; a child that reports frames is not asked.
func TestProcRekey(t *testing.T) {
	sh := testutil.NeedBinary(t, "sh")
	var rekeys atomic.Int32
	var script atomic.Value
	script.Store("exec sleep 30")
	started := make(chan time.Time, 4)
	p := Start(ProcOptions{Name: "test", Path: sh, Rekey: func() { rekeys.Add(1) },
		OnStart: func() { started <- time.Now() },
		Args:    func() []string { return []string{"-c", script.Load().(string)} }})
	defer p.Stop()
	at := <-started // the start was noted before OnStart ran
	p.CheckKeyframes(at)
	if n := rekeys.Load(); n != 0 {
		t.Fatalf("asked %d times at the child's start", n)
	}
	p.CheckKeyframes(at.Add(KeyAgain))
	p.CheckKeyframes(at.Add(KeyAgain + KeyAgain/2))
	if n := rekeys.Load(); n != 1 {
		t.Fatalf("asked %d times within KeyAgain after the first, want 1", n)
	}
	p.CheckKeyframes(at.Add(2 * KeyAgain))
	if n := rekeys.Load(); n != 2 {
		t.Fatalf("asked %d times after twice KeyAgain, want 2", n)
	}

	// A child that makes frames.
	script.Store("echo frame=3 >&3; echo progress=continue >&3; exec sleep 30")
	pid := p.PID()
	p.Kill()
	testutil.WaitFor(t, 5*time.Second, "a new child", func() bool { return p.PID() != 0 && p.PID() != pid })
	at = <-started
	testutil.WaitFor(t, 5*time.Second, "its frames", func() bool { return p.Frames() == 3 })
	p.CheckKeyframes(at.Add(10 * KeyAgain))
	if n := rekeys.Load(); n != 2 {
		t.Errorf("a child that made frames was asked again (%d)", n-2)
	}
}
