package sfu

import (
	"slices"
	"testing"
)

func TestNackLogAsksForWhatIsMissing(t *testing.T) {
	var l nackLog
	for _, s := range []uint16{65530, 65531, 65534, 1, 2} { // across the wrap: 65532, 65533, 65535, 0 missing
		l.add(s)
	}
	if got := l.missing(nil); !slices.Equal(got, []uint16{65532, 65533, 65535, 0}) {
		t.Fatalf("missing %v", got)
	}
	l.add(65533) // a retransmission arrives
	l.add(0)
	if got := l.missing(nil); !slices.Equal(got, []uint16{65532, 65535}) {
		t.Fatalf("after two arrived: missing %v", got)
	}
	// Asked for nackTries times in all, a number is given up on.
	for range nackTries - 2 {
		l.missing(nil)
	}
	if got := l.missing(nil); len(got) != 0 {
		t.Fatalf("after %d asks: missing %v", nackTries, got)
	}
}

func TestNackLogWindow(t *testing.T) {
	var l nackLog
	l.add(100)
	if got := l.missing(nil); len(got) != 0 {
		t.Fatalf("one packet: missing %v", got)
	}
	l.add(99) // older than the first: nothing before the first is asked for
	l.add(100 + nackWindow - 1)
	got := l.missing(nil)
	if len(got) != nackWindow-2 || got[0] != 101 || got[len(got)-1] != 100+nackWindow-2 {
		t.Fatalf("missing %d numbers, %v…", len(got), got[:min(3, len(got))])
	}
	// A number that went out of the window and back in is asked for anew.
	l.add(100 + 2*nackWindow - 2)
	got = l.missing(nil)
	if len(got) != nackWindow-2 || got[0] != 100+nackWindow {
		t.Fatalf("after sliding: missing %d numbers from %v", len(got), got[:min(3, len(got))])
	}
	// A jump past the window starts it again (a new sender).
	l.add(40000)
	if got := l.missing(nil); len(got) != 0 {
		t.Fatalf("after a jump: missing %v", got)
	}
	l.add(39000) // far behind: again a new start, not 1,000 NACKs
	l.add(39001)
	if got := l.missing(nil); len(got) != 0 {
		t.Fatalf("after a jump back: missing %v", got)
	}
}
