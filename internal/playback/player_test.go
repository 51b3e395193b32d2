package playback

import (
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestTiming: on simulated time every packet goes out exactly at its
// recorded arrival offset, audio and video interleaved on one time line,
// each stream with its own new SSRC and sequence numbers by one.
func TestTiming(t *testing.T) {
	rec := writeRecording(t, 2*time.Second, audioStream(100, 50), videoStream(130, 15, 3, 5))
	p, err := NewPlayer(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Play(t0)
	out := drive(p, t0, t0.Add(time.Hour), nil)
	if len(out) != 50+45 {
		t.Fatalf("%d packets sent, want 95", len(out))
	}
	a, v := 0, 0
	ssrc := map[string]uint32{}
	last := map[string]uint16{}
	for i, s := range out {
		var want time.Duration
		if s.kind == "audio" {
			want = ms(100 + 20*a)
			a++
		} else {
			want = ms(130 + 66*(v/3))
			v++
		}
		if got := s.at.Sub(t0); got != want {
			t.Fatalf("packet %d (%s) sent at %v, want %v", i, s.kind, got, want)
		}
		if ssrc[s.kind] == 0 {
			ssrc[s.kind] = s.ssrc
		} else if s.ssrc != ssrc[s.kind] || s.seq != last[s.kind]+1 {
			t.Fatalf("packet %d (%s): ssrc %x seq %d after %d", i, s.kind, s.ssrc, s.seq, last[s.kind])
		}
		last[s.kind] = s.seq
	}
	if ssrc["audio"] == 0xa || ssrc["video"] == 0xb || ssrc["audio"] == ssrc["video"] {
		t.Errorf("SSRCs %x, %x: want new ones, distinct", ssrc["audio"], ssrc["video"])
	}
	if !p.Ended() || p.Playing() || p.Position(t0.Add(time.Hour)) != 2*time.Second {
		t.Errorf("ended %v playing %v at %v", p.Ended(), p.Playing(), p.Position(t0.Add(time.Hour)))
	}
}

// TestPauseResume: nothing goes out while paused; afterwards packets keep
// their gaps, moved by the pause; sequence numbers run on and the
// timestamp advances by the wall time, pause included.
func TestPauseResume(t *testing.T) {
	rec := writeRecording(t, 2*time.Second, audioStream(0, 50))
	p, _ := NewPlayer(rec)
	defer p.Close()
	p.Play(t0)
	out := drive(p, t0, t0.Add(time.Hour), map[time.Duration]func(time.Time){
		ms(510):  func(now time.Time) { p.Pause(now) },
		ms(1510): func(now time.Time) { p.Play(now) },
	})
	if len(out) != 50 {
		t.Fatalf("%d packets", len(out))
	}
	for i, s := range out {
		want := ms(20 * i)
		if i > 25 { // 0..500 ms before the pause
			want += time.Second
		}
		if s.at.Sub(t0) != want {
			t.Fatalf("packet %d at %v, want %v", i, s.at.Sub(t0), want)
		}
		if i > 0 && s.seq != out[i-1].seq+1 {
			t.Fatalf("packet %d seq %d after %d", i, s.seq, out[i-1].seq)
		}
		wantTS := uint32(160)
		if i == 26 {
			wantTS = 8 * 1020 // 1020 ms of wall time at 8 kHz
		}
		if i > 0 && s.ts-out[i-1].ts != wantTS {
			t.Errorf("packet %d: timestamp +%d, want +%d", i, s.ts-out[i-1].ts, wantTS)
		}
	}
}

// TestSeek: a seek to 1 s sends the video from its last keyframe before
// 1 s at once, then the audio from 1 s and everything after in time;
// seeking back after the end plays again; a seek past the end is refused.
func TestSeek(t *testing.T) {
	// Keyframes every 5 frames: at 0, 330, 660, 990 ms, 1320 ms.
	rec := writeRecording(t, 2*time.Second, audioStream(0, 100), videoStream(0, 30, 2, 5))
	p, _ := NewPlayer(rec)
	defer p.Close()
	if err := p.Seek(t0, 3*time.Second); err != ErrSeek {
		t.Errorf("seek past the end: %v", err)
	}
	if err := p.Seek(t0, ms(1300)); err != nil {
		t.Fatal(err)
	}
	p.Play(t0)
	out := drive(p, t0, t0.Add(time.Hour), nil)
	// At once: video from 990 ms (frames 15..19: 10 packets up to 1254 ms).
	var first []sent
	for _, s := range out {
		if s.at == t0 {
			first = append(first, s)
		}
	}
	var vid int
	for _, s := range first {
		if s.kind == "video" {
			vid++
		}
	}
	if vid != 10 || !first[0].key || first[0].kind != "video" {
		t.Fatalf("sent at once: %d video packets, first %+v; want 10 from a keyframe", vid, first[0])
	}
	for _, s := range out {
		if s.kind == "audio" {
			if d := s.at.Sub(t0); d != 0 { // the first audio packet is due at 1300 ms: at once
				t.Errorf("first audio packet at +%v, want at once", d)
			}
			break
		}
	}
	audio := 0
	for _, s := range out {
		if s.kind == "audio" {
			audio++
		}
	}
	if audio != 35 {
		t.Errorf("%d audio packets after 1.3 s, want 35", audio)
	}
	if !p.Ended() {
		t.Fatal("not ended")
	}
	end := out[len(out)-1].at
	if err := p.Seek(end, 0); err != nil || p.Ended() {
		t.Fatalf("seek back: %v, ended %v", err, p.Ended())
	}
	p.Play(end)
	if again := drive(p, end, end.Add(time.Hour), nil); len(again) != 100+60 {
		t.Errorf("played again: %d packets", len(again))
	}
}

// TestSpeed: at 2× the gaps halve and so do the timestamps' steps; at
// 0.5× they double; 3× is refused.
func TestSpeed(t *testing.T) {
	for _, c := range []struct {
		speed float64
		gap   time.Duration
		ts    uint32
	}{{2, ms(10), 80}, {0.5, ms(40), 320}, {1, ms(20), 160}} {
		rec := writeRecording(t, time.Second, audioStream(0, 20))
		p, _ := NewPlayer(rec)
		if err := p.SetSpeed(t0, c.speed); err != nil {
			t.Fatal(err)
		}
		p.Play(t0)
		out := drive(p, t0, t0.Add(time.Hour), nil)
		for i := 1; i < len(out); i++ {
			if g := out[i].at.Sub(out[i-1].at); g != c.gap || out[i].ts-out[i-1].ts != c.ts {
				t.Fatalf("%v×: packet %d after %v, timestamp +%d; want %v, +%d", c.speed, i, g, out[i].ts-out[i-1].ts, c.gap, c.ts)
			}
		}
		p.Close()
	}
	rec := writeRecording(t, time.Second, audioStream(0, 20))
	p, _ := NewPlayer(rec)
	defer p.Close()
	for _, s := range []float64{3, 0.25, 0} {
		if err := p.SetSpeed(t0, s); err != ErrSpeed {
			t.Errorf("speed %v: %v", s, err)
		}
	}
	// A change mid-way: 10 packets at 1×, then 2×.
	p.Play(t0)
	out := drive(p, t0, t0.Add(time.Hour), map[time.Duration]func(time.Time){
		ms(190): func(now time.Time) { p.SetSpeed(now, 2) },
	})
	if d := out[len(out)-1].at.Sub(t0); d != ms(190+5+9*10) {
		t.Errorf("last packet at %v, want 285ms", d)
	}
}
