package media

import (
	"encoding/binary"
	"testing"
)

func event(ts uint32, ev byte, end bool) []byte {
	b := make([]byte, 16)
	b[0], b[1] = 0x80, 101
	binary.BigEndian.PutUint32(b[4:], ts)
	b[12], b[13] = ev, 10
	if end {
		b[13] |= 0x80
	}
	return b
}

// TestDigitDetector: each event's digit once at its first end, also when
// two events share a timestamp; other payload types are not events.
func TestDigitDetector(t *testing.T) {
	d := DigitDetector{PT: 101}
	var got []byte
	for _, ev := range []byte{10, 1} { // '*', '1', both at timestamp 8000
		for _, end := range []bool{false, false, true, true, true} {
			if isEv, dg, ok := d.Event(event(8000, ev, end)); !isEv {
				t.Fatal("an event not taken for one")
			} else if ok {
				got = append(got, dg)
			}
		}
	}
	if string(got) != "*1" {
		t.Fatalf("digits %q, want \"*1\"", got)
	}
	pcmu := event(9000, 5, true)
	pcmu[1] = 0
	if isEv, _, _ := d.Event(pcmu); isEv {
		t.Fatal("PCMU taken for an event")
	}
}

// FuzzDigitDetector: no packet crashes it.
func FuzzDigitDetector(f *testing.F) {
	f.Add(event(1, 11, true))
	f.Add([]byte{0x90, 101, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0xbe, 0xde, 0, 9})
	d := DigitDetector{PT: 101}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, dg, ok := d.Event(b); ok && dg == 0 {
			t.Fatal("a digit of zero")
		}
	})
}
