package playback

import (
	"encoding/base64"
	"encoding/binary"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/recorder"
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

// TestSpeed: at 2× and 0.5× the audio is stretched: 20 ms packets every
// 20 ms with timestamps by 160 (G.711 at 8 kHz), a recording's second of
// them taking half a second or two; at 1× the recorded packets go as
// they came; 3× is refused.
func TestSpeed(t *testing.T) {
	for _, c := range []struct {
		speed float64
		dur   time.Duration // how long a second of audio plays
	}{{2, ms(500)}, {0.5, ms(2000)}, {1, ms(1000)}} {
		rec := writeRecording(t, time.Second, audioStream(0, 50))
		p, _ := NewPlayer(rec)
		if err := p.SetSpeed(t0, c.speed); err != nil {
			t.Fatal(err)
		}
		p.Play(t0)
		out := drive(p, t0, t0.Add(time.Hour), nil)
		for i := 1; i < len(out); i++ {
			if g := out[i].at.Sub(out[i-1].at); g != ms(20) || out[i].ts-out[i-1].ts != 160 || out[i].seq != out[i-1].seq+1 {
				t.Fatalf("%v×: packet %d after %v, timestamp +%d, seq %d after %d; want 20ms, +160, by one",
					c.speed, i, g, out[i].ts-out[i-1].ts, out[i].seq, out[i-1].seq)
			}
		}
		if got := time.Duration(len(out)) * ms(20); got < c.dur-ms(40) || got > c.dur {
			t.Errorf("%v×: %d packets (%v of audio), want about %v", c.speed, len(out), got, c.dur)
		}
		if !p.Ended() {
			t.Errorf("%v×: not ended", c.speed)
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
}

// TestSpeedKeepsPitch: a recorded 440 Hz tone (PCMU) played at 2× and at
// 0.5× decodes as a 440 Hz tone half or twice as long: speech sped up,
// not a chipmunk; a change of speed half-way keeps the sequence numbers
// and timestamps running.
func TestSpeedKeepsPitch(t *testing.T) {
	for _, speed := range []float64{2, 0.5} {
		rec := writeRecording(t, 2*time.Second, toneStream(0, 100, 440))
		playTone(t, rec, speed, 8000, 160, func(b []byte, pcm []int16) []int16 {
			for _, x := range b {
				pcm = append(pcm, audio.MulawDecode(x))
			}
			return pcm
		})
	}
}

// TestSpeedKeepsPitchOpus: the same for a browser's Opus, decoded and
// encoded again by libopus.
func TestSpeedKeepsPitchOpus(t *testing.T) {
	for _, speed := range []float64{1.5, 0.5} {
		rec := writeRecording(t, 2*time.Second, opusToneStream(t, 0, 100, 440))
		dec, err := codec.NewDecoder(codec.Opus)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]int16, 5760)
		playTone(t, rec, speed, 48000, 960, func(b []byte, pcm []int16) []int16 {
			n, err := dec.Decode(b, buf)
			if err != nil {
				t.Fatal(err)
			}
			return append(pcm, buf[:n]...)
		})
	}
}

// playTone plays rec at speed on simulated time, checks that the packets
// run on by one frame of ticks each, decodes them with decode and checks
// that 2 s of a 440 Hz tone came out 2/speed s long, at 440 Hz.
func playTone(t *testing.T, rec *export.Recording, speed float64, rate int, ticks uint32, decode func(payload []byte, pcm []int16) []int16) {
	t.Helper()
	{
		p, _ := NewPlayer(rec)
		p.SetSpeed(t0, speed)
		p.Play(t0)
		var pcm []int16
		var last sent
		n := 0
		emit := func(tr *Track, b []byte) {
			pcm = decode(b[12:], pcm)
			seq, ts := binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:])
			if n > 0 && (seq != last.seq+1 || ts != last.ts+ticks) {
				t.Fatalf("%v×: seq %d ts %d after %d, %d", speed, seq, ts, last.seq, last.ts)
			}
			last.seq, last.ts = seq, ts
			n++
		}
		for now := t0; !p.Ended() && now.Before(t0.Add(time.Minute)); now = now.Add(ms(5)) {
			p.Step(now, emit)
		}
		want := 2 / speed * float64(rate)
		if got := float64(len(pcm)); got < 0.95*want || got > 1.01*want {
			t.Errorf("%v×: %d samples, want about %.0f", speed, len(pcm), want)
		}
		body := pcm[rate/10 : len(pcm)-rate/10]
		if at440, at880 := audio.WindowedToneShare(body, 440, rate), audio.WindowedToneShare(body, 440*speed, rate); at440 < 0.8 || at880 > 0.05 {
			t.Errorf("%v×: %.2f of the energy at 440 Hz, %.2f at %.0f Hz; want the tone at its own pitch", speed, at440, at880, 440*speed)
		}
		p.Close()
	}
}

// TestTexts: a recording's chat lines and notes are said at their places
// on the time line, named by the time line's members, the whiteboard's
// strokes not; a seek skips the lines before it.
func TestTexts(t *testing.T) {
	line := func(flow uint32, seq uint64, text string) string {
		m := conversation.Message{Conversation: 1, Flow: flow, Sender: 1, Seq: seq, Sent: started, Payload: []byte(text)}
		return base64.StdEncoding.EncodeToString(m.Marshal())
	}
	rec := writeRecording(t, 2*time.Second, audioStream(0, 100))
	rec.Manifest.Events = []recorder.Event{
		{Kind: recorder.MemberJoined, Member: "m_a", Detail: "Ada (present)"},
		{Kind: recorder.Message, Member: "m_a", OffsetMS: 300, Detail: line(1, 1, "hello")},
		{Kind: recorder.Message, Member: "m_a", OffsetMS: 400, Detail: line(2, 2, "a stroke")},
		{Kind: recorder.Message, Member: "m_a", OffsetMS: 500, Detail: line(4, 4, `{"t":1,"text":"the notes"}`)},
		{Kind: recorder.Message, Member: "m_a", OffsetMS: 600, Detail: line(4, 5, "not notes")},
		{Kind: recorder.Message, Member: "m_x", OffsetMS: 1500, Detail: line(1, 3, "bye")},
		{Kind: recorder.Message, Member: "m_a", OffsetMS: 1600, Detail: "not base64!"},
	}
	p, err := NewPlayer(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var said []string
	var at []time.Duration
	now := t0
	p.OnText = func(x Text) {
		if x.Notes {
			x.Text = "notes " + x.Text
		}
		said = append(said, x.From+": "+x.Text)
		at = append(at, now.Sub(t0))
	}
	p.Play(t0)
	for ; !p.Ended() && now.Before(t0.Add(time.Minute)); now = now.Add(ms(10)) {
		p.Step(now, func(*Track, []byte) {})
	}
	if len(said) != 3 || said[0] != "Ada: hello" || said[1] != "Ada: notes the notes" || said[2] != "m_x: bye" ||
		at[0] != ms(300) || at[1] != ms(500) || at[2] != ms(1500) {
		t.Fatalf("said %v at %v", said, at)
	}
	said = nil
	if err := p.Seek(now, ms(1000)); err != nil {
		t.Fatal(err)
	}
	p.Play(now)
	for end := now.Add(time.Minute); !p.Ended() && now.Before(end); now = now.Add(ms(10)) {
		p.Step(now, func(*Track, []byte) {})
	}
	if len(said) != 1 || said[0] != "m_x: bye" {
		t.Errorf("after a seek to 1 s: %v", said)
	}
}
