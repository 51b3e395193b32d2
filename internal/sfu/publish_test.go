package sfu

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyframeThrottleDefersInsteadOfDropping: the first request goes; the
// ones inside the window do not, but the window's end brings one more
// (one for all of them), which then goes.
func TestKeyframeThrottleDefersInsteadOfDropping(t *testing.T) {
	var k keyframeThrottle
	var again atomic.Int32
	went := make(chan bool, 4)
	retry := func() {
		again.Add(1)
		went <- k.ask(func() {})
	}
	if !k.ask(retry) {
		t.Fatal("the first request was held back")
	}
	for i := 0; i < 3; i++ {
		if k.ask(retry) {
			t.Fatalf("request %d inside the window went", i+2)
		}
	}
	select {
	case ok := <-went:
		if !ok {
			t.Fatal("the request made again at the window's end was held back")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held-back requests were dropped: none was made again")
	}
	time.Sleep(2 * pliEvery) // a second retry would have run by now
	if n := again.Load(); n != 1 {
		t.Fatalf("made again %d times for three held back, want once", n)
	}
}
