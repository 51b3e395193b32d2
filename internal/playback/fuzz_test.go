package playback

import (
	"testing"
	"time"
)

// FuzzPlayer: recorded packets of any content (a VP8 stream's payloads,
// offsets and sequence numbers from the input) play, seek and change
// speed on simulated time without a panic, and every packet goes out once
// per pass.
func FuzzPlayer(f *testing.F) {
	f.Add([]byte{0x10, 0x00, 0x9d, 0x01, 0x2a}, uint16(300))
	f.Add([]byte{0x90, 0x80, 0x81}, uint16(0))
	f.Add([]byte{}, uint16(65535))
	f.Fuzz(func(t *testing.T, b []byte, seek uint16) {
		s := stream{file: "002-video-2.rtpdump", kind: "video", codec: "video/VP8", pt: 96, rate: 90000, ssrc: 3}
		for i := range len(b) + 1 {
			s.pkts = append(s.pkts, pkt{ms: uint32(i) * uint32(len(b)%7+1) * 10, seq: uint16(i * int(seek%3)), ts: uint32(i) * uint32(seek), pl: b[:i]})
		}
		rec := writeRecording(t, time.Duration(len(b)+1)*100*time.Millisecond, s)
		p, err := NewPlayer(rec)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Seek(t0, time.Duration(seek)*time.Millisecond); err != nil && err != ErrSeek {
			t.Fatal(err)
		}
		p.SetSpeed(t0, 0.5+float64(seek%4)/2)
		p.Play(t0)
		out := drive(p, t0, t0.Add(time.Hour), nil)
		if len(out) > len(s.pkts) {
			t.Fatalf("%d packets sent of %d", len(out), len(s.pkts))
		}
	})
}
