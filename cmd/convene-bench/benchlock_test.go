package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLockBench: while one benchmark holds the lock a second refuses with a
// clear message, and once it is released the second gets it.
func TestLockBench(t *testing.T) {
	var errb bytes.Buffer
	first := lockBench("broker", false, &errb)
	if first == nil {
		t.Skipf("the benchmark lock is held by a benchmark running here: %s", errb.String())
	}
	if second := lockBench("sip", false, &errb); second != nil {
		second.Close()
		t.Fatal("a second benchmark got the lock while the first held it")
	}
	if !strings.Contains(errb.String(), "another benchmark is running") {
		t.Errorf("message %q", errb.String())
	}
	first.Close()
	again := lockBench("sip", false, &errb)
	if again == nil {
		t.Fatal("lock not free after the first benchmark released it")
	}
	again.Close()
}
