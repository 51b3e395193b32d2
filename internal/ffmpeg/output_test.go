package ffmpeg

import (
	"encoding/binary"
	"os"
	"testing"
	"time"
)

func rtp(seq uint16, ts, ssrc uint32) []byte {
	b := make([]byte, 20)
	b[0], b[1] = 0x80, 96
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], ts)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	return b
}

// TestContinuity: a child's packets keep their spacing under the
// outlet's SSRC; the next child's (another SSRC, other numbers) go on at
// the next sequence number and the timestamp the wall time gives.
func TestContinuity(t *testing.T) {
	c := continuity{ssrc: 0xabc, rate: 90000}
	t0 := time.Now()
	var out [][]byte
	for i, p := range []struct {
		seq  uint16
		ts   uint32
		ssrc uint32
		at   time.Duration
	}{{100, 1000, 1, 0}, {101, 7000, 1, 66 * time.Millisecond}, {65535, 50, 2, 566 * time.Millisecond}, {0, 6050, 2, 633 * time.Millisecond}} {
		b := rtp(p.seq, p.ts, p.ssrc)
		c.rewrite(b, t0.Add(p.at))
		out = append(out, b)
		if got := binary.BigEndian.Uint32(b[8:]); got != 0xabc {
			t.Errorf("packet %d: SSRC %x", i, got)
		}
	}
	seq := func(i int) uint16 { return binary.BigEndian.Uint16(out[i][2:]) }
	ts := func(i int) uint32 { return binary.BigEndian.Uint32(out[i][4:]) }
	for i := 1; i < len(out); i++ {
		if seq(i) != seq(i-1)+1 {
			t.Errorf("packet %d: seq %d after %d", i, seq(i), seq(i-1))
		}
	}
	if d := ts(1) - ts(0); d != 6000 {
		t.Errorf("within a child: ts +%d, want 6000", d)
	}
	if d := ts(2) - ts(1); d != 45000 { // 500 ms of wall time
		t.Errorf("across children: ts +%d, want 45000", d)
	}
	if d := ts(3) - ts(2); d != 6000 {
		t.Errorf("within the next child: ts +%d, want 6000", d)
	}
}

// TestProcTicks reads this process's CPU time.
func TestProcTicks(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	var m CPUMeter
	if _, ok := m.Sample(os.Getpid(), time.Now()); ok {
		t.Error("a first sample has nothing to compare with")
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	if cores, ok := m.Sample(os.Getpid(), time.Now()); !ok || cores < 0 {
		t.Errorf("second sample: %v %v", cores, ok)
	}
}
