package export

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/recorder"
)

func near(a, b, tol time.Duration) bool { return a-b <= tol && b-a <= tol }

// TestPlaceByArrival: without sender reports a stream starts where its
// least delayed packet says, not where its first (late) packet arrived.
func TestPlaceByArrival(t *testing.T) {
	jitter := func(i int) time.Duration {
		if i == 0 {
			return 35 * time.Millisecond // the first packet was held up
		}
		return time.Duration(i%3) * time.Millisecond
	}
	dir := writeRecording(t, 2*time.Second, pcmu("001-audio-1.rtpdump", "m_a", 1, 300*time.Millisecond, 1000, 50, 0x80, jitter))
	rec, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Audio) != 1 {
		t.Fatalf("%d audio streams", len(rec.Audio))
	}
	s := rec.Audio[0]
	if !near(s.Start, 300*time.Millisecond, time.Millisecond) || s.Aligned != "arrival" {
		t.Errorf("start %v (%s), want 300ms by arrival", s.Start, s.Aligned)
	}
	if rec.Duration != 2*time.Second {
		t.Errorf("duration %v, want the recording's 2s", rec.Duration)
	}
}

// TestPlaceBySenderReports: two streams of one clock whose reports say
// the second began 500 ms after the first keep those 500 ms, though the
// second's packets arrived 50 ms later than that; a third, whose sender's
// clock is an hour off, is placed by its arrival.
func TestPlaceBySenderReports(t *testing.T) {
	a := pcmu("001-audio-1.rtpdump", "m_a", 1, 100*time.Millisecond, 4000, 50, 0x80, nil)
	b := pcmu("002-audio-2.rtpdump", "m_b", 2, 650*time.Millisecond, 0xffffff00, 50, 0x80, nil) // wraps
	c := pcmu("003-audio-3.rtpdump", "m_c", 3, 700*time.Millisecond, 77, 50, 0x80, nil)
	// Each report comes 200 ms (1600 ticks) into its stream.
	sr := func(start time.Time, ts0 uint32) []recorder.SenderReport {
		at := start.Add(200 * time.Millisecond)
		return []recorder.SenderReport{{NTP: ntp(at), NTPTime: at, RTP: ts0 + 1600}}
	}
	a.Reports = sr(started.Add(100*time.Millisecond), 4000)
	b.Reports = sr(started.Add(600*time.Millisecond), 0xffffff00)
	c.Reports = sr(started.Add(time.Hour), 77)
	rec, err := Open(writeRecording(t, 2*time.Second, a, b, c))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Audio) != 3 {
		t.Fatalf("%d audio streams", len(rec.Audio))
	}
	sa, sb, sc := rec.Audio[0], rec.Audio[1], rec.Audio[2]
	if d := sb.Start - sa.Start; !near(d, 500*time.Millisecond, time.Millisecond) || sa.Aligned != "sender_report" || sb.Aligned != "sender_report" {
		t.Errorf("b starts %v after a (%s, %s), want 500ms by sender reports", d, sa.Aligned, sb.Aligned)
	}
	if !near(sb.Shift-sa.Shift, -50*time.Millisecond, time.Millisecond) {
		t.Errorf("b's arrivals shifted %v against a's, want -50ms", sb.Shift-sa.Shift)
	}
	if !near(sc.Start, 700*time.Millisecond, time.Millisecond) || sc.Aligned != "arrival" || sc.Shift != 0 {
		t.Errorf("c starts at %v (%s), want 700ms by arrival", sc.Start, sc.Aligned)
	}
}

// TestWAV: a PCMU stream from 200 ms to 1.2 s with one packet lost
// exports as 48 kHz mono PCM of the recording's length, silent before it,
// after it and where the packet was lost, with its level elsewhere; two
// streams at once are mixed.
func TestWAV(t *testing.T) {
	lost := pcmu("001-audio-1.rtpdump", "m_a", 1, 200*time.Millisecond, 0xfffff000, 50, 0x90, nil)
	lost.Packets = append(lost.Packets[:10], lost.Packets[11:]...) // 400–420 ms
	other := pcmu("002-audio-2.rtpdump", "m_b", 2, 1500*time.Millisecond, 0, 10, 0x90, nil)
	rec, err := Open(writeRecording(t, 2*time.Second, lost, other))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var last time.Duration
	if err := rec.Write(&buf, WAV, func(done, total time.Duration) { last = done }); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != rec.Size(WAV) || buf.Len() != 44+2*Rate*2 {
		t.Fatalf("%d bytes, Size says %d, want %d", buf.Len(), rec.Size(WAV), 44+2*Rate*2)
	}
	if last != 2*time.Second {
		t.Errorf("progress ended at %v", last)
	}
	b := buf.Bytes()
	if string(b[0:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || binary.LittleEndian.Uint32(b[24:]) != Rate {
		t.Fatalf("header %q", b[:44])
	}
	want := audio.MulawDecode(0x90)
	at := func(ms float64) int16 {
		i := 44 + 2*int(ms*Rate/1000)
		return int16(binary.LittleEndian.Uint16(b[i:]))
	}
	// The resampler's filter rings for about 1.5 ms at each edge.
	for _, c := range []struct {
		from, to float64
		level    bool
	}{{0, 198, false}, {203, 398, true}, {403, 418, false}, {423, 1198, true}, {1203, 1498, false}, {1503, 1698, true}, {1703, 1999, false}} {
		for ms := c.from; ms < c.to; ms += 0.5 {
			v := at(ms)
			if c.level && (v < want-want/20 || v > want+want/20) || !c.level && (v > 200 || v < -200) {
				t.Fatalf("at %.1f ms: %d, want level %v (%d)", ms, v, c.level, want)
			}
		}
	}
}

// TestOggAndWebMAudio: audio-only Ogg and WebM carry Opus; a recording
// with neither kind is ErrNoStreams.
func TestOggAndWebMAudio(t *testing.T) {
	rec, err := Open(writeRecording(t, time.Second, pcmu("001-audio-1.rtpdump", "m_a", 1, 0, 0, 40, 0x90, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{Ogg, WebM} {
		var buf bytes.Buffer
		if err := rec.Write(&buf, f, nil); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if f == Ogg && !bytes.HasPrefix(buf.Bytes(), []byte("OggS")) || f == WebM && !bytes.HasPrefix(buf.Bytes(), []byte{0x1a, 0x45, 0xdf, 0xa3}) {
			t.Errorf("%s: starts %x", f, buf.Bytes()[:8])
		}
		if !bytes.Contains(buf.Bytes(), []byte("OpusHead")) {
			t.Errorf("%s: no OpusHead", f)
		}
	}
	empty, err := Open(writeRecording(t, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Write(new(bytes.Buffer), WebM, nil); err != ErrNoStreams {
		t.Errorf("no streams: %v", err)
	}
}

// FuzzExport: any bytes as a stream's packets (audio PCMU and Opus, video
// VP8) export without a panic.
func FuzzExport(f *testing.F) {
	f.Add([]byte{0x90, 0x80, 0x81, 0x23, 0x10, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x40, 0x01, 0xf0, 0x00}, uint8(0))
	f.Add([]byte{0xfc, 0xff, 0xfe}, uint8(1))
	f.Add([]byte{0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x02, 0x00, 0x02, 0x00, 1, 2, 3}, uint8(2))
	f.Fuzz(func(t *testing.T, payload []byte, kind uint8) {
		s := testStream{File: "001-x-1.rtpdump", Kind: "audio", Codec: "audio/PCMU", PT: 0, Rate: 8000, SSRC: 1}
		switch kind % 3 {
		case 1:
			s.Codec, s.PT, s.Rate = "audio/opus", 111, 48000
		case 2:
			s.Kind, s.Codec, s.PT, s.Rate = "video", "video/VP8", 96, 90000
		}
		r := rand.New(rand.NewPCG(uint64(len(payload)), uint64(kind)))
		for i := range 8 {
			cut := payload[:r.IntN(len(payload)+1)]
			s.Packets = append(s.Packets, testPacket{Arrival: time.Duration(i) * 20 * time.Millisecond,
				TS: uint32(i * r.IntN(3000)), Seq: uint16(i + r.IntN(2)), Marker: r.IntN(2) == 0, Payload: cut})
		}
		rec, err := Open(writeRecording(t, 200*time.Millisecond, s))
		if err != nil {
			return
		}
		for _, f := range []Format{WAV, WebM} {
			rec.Write(new(bytes.Buffer), f, nil)
		}
	})
}

// TestWebMTakesADecodableCamera: the camera with the most packets holds
// no keyframe (recorded before its sender answered the keyframe request);
// the WebM's picture comes from the other camera, which does, rather than
// having none.
func TestWebMTakesADecodableCamera(t *testing.T) {
	vp8 := func(file, member string, ssrc uint32, n int, key bool) testStream {
		return vp8Test(file, member, ssrc, n, key, 2)
	}
	rec, err := Open(writeRecording(t, 2*time.Second,
		vp8("001-video-1.rtpdump", "m_a", 1, 40, false), vp8("002-video-2.rtpdump", "m_b", 2, 20, true)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rec.Write(&buf, WebM, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte("V_VP8")) {
		t.Fatalf("the WebM (%d bytes) has no video track", buf.Len())
	}
}

// vp8Test is a VP8 stream of n one-packet frames, 40 ms apart: a keyframe
// of a size×size picture every 10 if key, else interframes only.
func vp8Test(file, member string, ssrc uint32, n int, key bool, size byte) testStream {
	s := testStream{File: file, Kind: "video", Member: member, Codec: "video/VP8", PT: 96, Rate: 90000, SSRC: ssrc}
	for i := range n {
		// A payload descriptor starting a partition, then a frame tag:
		// bit 0 clear for a keyframe (with its start code and picture
		// size), set for an interframe.
		pl := []byte{0x10, 0x01, 0x00, 0x00, 1, 2, 3}
		if key && i%10 == 0 {
			pl = []byte{0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, size, 0x00, size, 0x00, 1, 2, 3}
		}
		s.Packets = append(s.Packets, testPacket{Arrival: time.Duration(i) * 40 * time.Millisecond,
			TS: uint32(i * 3600), Seq: uint16(i), Marker: true, Payload: pl})
	}
	return s
}

// TestWebMTakesTheComposite: a recorded composite (fewer packets than a
// camera) is the WebM's picture: the file shows everyone.
func TestWebMTakesTheComposite(t *testing.T) {
	comp := vp8Test("002-video-2.rtpdump", "m_c", 2, 10, true, 8)
	comp.Source = "composite"
	rec, err := Open(writeRecording(t, 2*time.Second, vp8Test("001-video-1.rtpdump", "m_a", 1, 40, true, 2), comp))
	if err != nil {
		t.Fatal(err)
	}
	v, w, h, err := vp8Picture(vp8Streams(rec))
	if err != nil || v == nil {
		t.Fatalf("no picture: %v", err)
	}
	v.Close()
	if w != 8 || h != 8 {
		t.Errorf("the picture is %d×%d, want the composite's 8×8", w, h)
	}
}
