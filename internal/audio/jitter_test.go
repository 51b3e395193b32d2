package audio

import "testing"

func frameOf(v int16) []int16 {
	f := make([]int16, 160)
	for i := range f {
		f[i] = v
	}
	return f
}

func TestJitterBufferReordersAndConceals(t *testing.T) {
	j := NewJitterBuffer(160, 2)
	base := uint32(0xffffff00) // the timestamps wrap during the test
	// Frames 0..5 arrive with 2 and 3 swapped and 4 missing.
	for _, k := range []int{0, 1, 3, 2, 5} {
		j.Push(base+uint32(k)*160, frameOf(int16(1000+k)))
	}
	out := make([]int16, 160)
	var got []int16
	var conc []bool
	for range 6 {
		c := j.Pop(out)
		got, conc = append(got, out[0]), append(conc, c)
	}
	// The buffer starts one frame behind the first: its first frame is
	// concealed silence, then 0, 1, 2, 3, then 4 is concealed from 3.
	want := []int16{0, 1000, 1001, 1002, 1003, 1003 >> 1}
	wantC := []bool{true, false, false, false, false, true}
	for i := range want {
		if got[i] != want[i] || conc[i] != wantC[i] {
			t.Fatalf("frame %d: %d concealed=%v, want %d concealed=%v (all: %v %v)", i, got[i], conc[i], want[i], wantC[i], got, conc)
		}
	}
	// 5 plays, then a late copy of 4 is dropped.
	if j.Pop(out); out[0] != 1005 {
		t.Fatalf("frame 5: %d", out[0])
	}
	j.Push(base+4*160, frameOf(1004))
	if j.Late != 1 {
		t.Errorf("late frames %d, want 1", j.Late)
	}
	// Long loss fades to silence.
	for range 5 {
		j.Pop(out)
	}
	if out[0] != 0 {
		t.Errorf("after 5 lost frames: %d, want silence", out[0])
	}
	if j.Played != 5 || j.Concealed != 7 {
		t.Errorf("played %d concealed %d, want 5 and 7", j.Played, j.Concealed)
	}
	// A jump far ahead restarts the buffer there.
	j.Push(base+100000, frameOf(7))
	j.Push(base+100000+160, frameOf(8))
	j.Pop(out)
	if j.Pop(out); out[0] != 7 {
		t.Errorf("after a jump: %d, want 7", out[0])
	}
}

func FuzzJitterBuffer(f *testing.F) {
	f.Add([]byte{0, 1, 3, 2, 9, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		j := NewJitterBuffer(160, 3)
		out := make([]int16, 160)
		for i, x := range b {
			if x%3 == 0 {
				j.Pop(out)
			} else {
				j.Push(uint32(x)*160*uint32(i+1), frameOf(int16(x)))
			}
		}
	})
}

// TestJitterBufferFollowsADriftingClock: a sender whose clock runs 5 %
// slower or faster than the mixer's still gets nearly every frame played,
// and the buffer's delay stays bounded.
func TestJitterBufferFollowsADriftingClock(t *testing.T) {
	for _, rate := range []float64{0.95, 1.05} {
		j := NewJitterBuffer(160, 3)
		out := make([]int16, 160)
		sent := 0
		// The mixer pops every 20 ms; the sender has sent rate×ticks frames.
		for tick := range 3000 {
			for ; float64(sent) < rate*float64(tick+1); sent++ {
				j.Push(uint32(sent*160), frameOf(int16(sent%1000+1)))
			}
			j.Pop(out)
			if held := int32(j.newest-j.next) / 160; held > 3*3+1 {
				t.Fatalf("rate %.2f: %d frames held at tick %d", rate, held, tick)
			}
		}
		played := float64(j.Played) / float64(sent)
		t.Logf("rate %.2f: sent %d, played %d (%.3f), concealed %d, late %d, resynced %d", rate, sent, j.Played, played,
			j.Concealed, j.Late, j.Resynced)
		if played < 0.9 {
			t.Errorf("rate %.2f: %.3f of the frames played", rate, played)
		}
	}
}
