package sfu

import (
	"testing"

	"github.com/convene/convene/internal/media"
)

// TestSinceKeyframe: the packets from the newest keyframe on, in order;
// nothing when that keyframe is too old, lost from the history, or
// farther back than replayMax, or when there is none.
func TestSinceKeyframe(t *testing.T) {
	isKey := func(b []byte) bool { return b[0] == 'K' }
	fill := func(h *history, kinds string, seq uint16, ts uint32) {
		for _, c := range kinds {
			pk := media.NewPacket()
			pk.SetLen(1)
			pk.Bytes()[0] = byte(c)
			h.add(pk, pk.Bytes(), seq, ts, false)
			pk.Release()
			seq++
			ts += 3000
		}
	}
	seqs := func(ps []sentPacket) []uint16 {
		var out []uint16
		for _, p := range ps {
			out = append(out, p.seq)
			p.pk.Release()
		}
		return out
	}
	h := &history{}
	fill(h, "KddKdd", 65533, 0) // across the wrap of sequence numbers
	if got := seqs(h.sinceKeyframe(isKey, 90000)); len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("from the newest keyframe: %v, want [0 1 2]", got)
	}
	if got := h.sinceKeyframe(isKey, 6000); got != nil {
		t.Fatalf("a keyframe 6000 ticks old with a limit of 6000: %v, want nothing", seqs(got))
	}
	h = &history{}
	fill(h, "dddd", 10, 0)
	if got := h.sinceKeyframe(isKey, 90000); got != nil {
		t.Fatalf("no keyframe: %v", seqs(got))
	}
	h = &history{}
	fill(h, "Kd", 10, 0)
	fill(h, "d", 13, 6000) // 12 never came
	if got := h.sinceKeyframe(isKey, 90000); got != nil {
		t.Fatalf("a gap after the keyframe: %v, want nothing", seqs(got))
	}
	h = &history{}
	long := "K"
	for len(long) <= replayMax {
		long += "d"
	}
	fill(h, long, 0, 0)
	if got := h.sinceKeyframe(func(b []byte) bool { return b[0] == 'K' }, 1<<31); got != nil {
		t.Fatalf("a keyframe %d packets back: %d packets, want nothing", len(long), len(got))
	}
	h.close()
}
