package proc

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestStop(t *testing.T) {
	// A process that exits on SIGTERM is not waited for the whole grace.
	polite := exec.Command("sleep", "30")
	if err := polite.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	Stop(polite, 20*time.Second)
	if polite.ProcessState == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("sleep not reaped promptly after SIGTERM (%v, %v)", polite.ProcessState, time.Since(start))
	}

	// One that ignores SIGTERM is killed after the grace. It waits in the
	// shell's own read on a pipe, so it leaves no child behind.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// It says when its trap is set.
	stubborn := exec.Command("sh", "-c", `trap "" TERM; echo trapped; read x`)
	stubborn.Stdin = r
	out, err := stubborn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "trapped\n" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	Stop(stubborn, 300*time.Millisecond)
	if stubborn.ProcessState == nil {
		t.Fatal("a process ignoring SIGTERM was not reaped")
	}
	if ws := stubborn.ProcessState.String(); ws != "signal: killed" {
		t.Fatalf("exit %q, want signal: killed", ws)
	}

	Stop(exec.Command("true"), time.Second) // never started: nothing to do
	Stop(nil, time.Second)
}

func TestParseWritten(t *testing.T) {
	n, err := parseWritten("rchar: 100\nwchar: 2345\nsyscr: 3\n")
	if err != nil || n != 2345 {
		t.Fatalf("got %d, %v; want 2345", n, err)
	}
	if _, err := parseWritten("rchar: 1\n"); err == nil {
		t.Fatal("no wchar line accepted")
	}
	if _, err := Written(os.Getpid()); err != nil {
		t.Fatalf("this process's /proc/PID/io: %v", err)
	}
}
