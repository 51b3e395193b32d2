package playback

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtpdump"
)

var started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pkt is one recorded RTP packet: arrival offset, sequence number,
// timestamp, payload.
type pkt struct {
	ms  uint32
	seq uint16
	ts  uint32
	pl  []byte
}

type stream struct {
	file, kind, codec string
	pt                uint8
	rate              uint32
	ssrc              uint32
	pkts              []pkt
}

// audioStream: n PCMU packets every 20 ms from first ms.
func audioStream(first uint32, n int) stream {
	s := stream{file: "001-audio-1.rtpdump", kind: "audio", codec: "audio/PCMU", pt: 0, rate: 8000, ssrc: 0xa}
	for i := range n {
		s.pkts = append(s.pkts, pkt{ms: first + uint32(20*i), seq: uint16(1000 + i), ts: uint32(160 * i), pl: make([]byte, 160)})
	}
	return s
}

// toneStream: n PCMU packets of a freq Hz tone every 20 ms from first ms.
func toneStream(first uint32, n int, freq float64) stream {
	s := audioStream(first, n)
	for i := range s.pkts {
		for j := range s.pkts[i].pl {
			v := 8000 * math.Sin(2*math.Pi*freq*float64(160*i+j)/8000)
			s.pkts[i].pl[j] = audio.MulawEncode(int16(v))
		}
	}
	return s
}

// opusToneStream: n Opus packets (48 kHz, 20 ms) of a freq Hz tone every
// 20 ms from first ms.
func opusToneStream(t testing.TB, first uint32, n int, freq float64) stream {
	enc, err := codec.NewEncoder(codec.Opus)
	if err != nil {
		t.Fatal(err)
	}
	s := stream{file: "001-audio-1.rtpdump", kind: "audio", codec: "audio/opus", pt: 111, rate: 48000, ssrc: 0xa}
	pcm := make([]int16, 960)
	for i := range n {
		for j := range pcm {
			pcm[j] = int16(8000 * math.Sin(2*math.Pi*freq*float64(960*i+j)/48000))
		}
		out := make([]byte, 1500)
		m, err := enc.Encode(pcm, out)
		if err != nil {
			t.Fatal(err)
		}
		s.pkts = append(s.pkts, pkt{ms: first + uint32(20*i), seq: uint16(i), ts: uint32(960 * i), pl: out[:m]})
	}
	return s
}

// videoStream: frames every 66 ms from first ms, each of per packets
// arriving together; every key-th frame is a VP8 keyframe (RFC 7741
// descriptor S=1 PID=0, then P=0).
func videoStream(first uint32, frames, per, key int) stream {
	s := stream{file: "002-video-2.rtpdump", kind: "video", codec: "video/VP8", pt: 96, rate: 90000, ssrc: 0xb}
	seq := uint16(50)
	for f := range frames {
		for i := range per {
			pl := []byte{0x00, 0x01, 0, 0}
			if i == 0 {
				pl[0] = 0x10
				if f%key == 0 {
					pl[1] = 0x00
				}
			}
			s.pkts = append(s.pkts, pkt{ms: first + uint32(66*f), seq: seq, ts: uint32(6000 * f), pl: pl})
			seq++
		}
	}
	return s
}

func writeRecording(t testing.TB, end time.Duration, streams ...stream) *export.Recording {
	t.Helper()
	dir := t.TempDir()
	ended := started.Add(end)
	m := recorder.Manifest{Version: recorder.ManifestVersion, Session: "s_t", State: recorder.StateFinished,
		Started: started, Ended: &ended, Events: []recorder.Event{}}
	for _, s := range streams {
		f, err := os.Create(filepath.Join(dir, s.file))
		if err != nil {
			t.Fatal(err)
		}
		w := rtpdump.NewWriter(f, rtpdump.Header{Start: started}, 0)
		for _, p := range s.pkts {
			b := make([]byte, 12+len(p.pl))
			b[0], b[1] = 0x80, s.pt
			binary.BigEndian.PutUint16(b[2:], p.seq)
			binary.BigEndian.PutUint32(b[4:], p.ts)
			binary.BigEndian.PutUint32(b[8:], s.ssrc)
			copy(b[12:], p.pl)
			w.WriteRTP(p.ms, b)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		side := s.file[:len(s.file)-len(".rtpdump")] + ".json"
		put(t, filepath.Join(dir, side), recorder.Sidecar{Version: 1, File: s.file, SSRC: s.ssrc, Kind: s.kind, ClockRate: s.rate,
			PayloadTypes: []recorder.PayloadType{{PT: s.pt, Codec: s.codec, ClockRate: s.rate}}, Packets: uint64(len(s.pkts)),
			SenderReports: []recorder.SenderReport{}, State: recorder.StateFinished})
		m.Streams = append(m.Streams, recorder.StreamEntry{File: s.file, Sidecar: side, SSRC: s.ssrc, Kind: s.kind})
	}
	put(t, filepath.Join(dir, recorder.ManifestFile), m)
	rec, err := export.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func put(t testing.TB, path string, v any) {
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sent is one packet a test saw: when, from which track, its header.
type sent struct {
	at   time.Time
	kind string
	seq  uint16
	ts   uint32
	ssrc uint32
	key  bool
}

// drive runs p on simulated time from t0 until it ends or until stop,
// stepping exactly when Step says the next packet is due; at each
// simulated time in hooks, the hook runs first.
func drive(p *Player, t0, stop time.Time, hooks map[time.Duration]func(now time.Time)) []sent {
	var out []sent
	emit := func(t *Track, b []byte) {
		out = append(out, sent{kind: t.Kind.String(), seq: binary.BigEndian.Uint16(b[2:]), ts: binary.BigEndian.Uint32(b[4:]),
			ssrc: binary.BigEndian.Uint32(b[8:]), key: len(b) > 13 && b[12] == 0x10 && b[13]&1 == 0})
	}
	now := t0
	for now.Before(stop) {
		// The next event: a hook or the next packet, whichever is first.
		next := stop
		for d, h := range hooks {
			if at := t0.Add(d); !at.After(now) {
				h(now)
				delete(hooks, d)
			} else if at.Before(next) {
				next = at
			}
		}
		n := len(out)
		wait, done := p.Step(now, emit)
		for i := n; i < len(out); i++ {
			out[i].at = now
		}
		if done && len(hooks) == 0 {
			break
		}
		if wait >= 0 && now.Add(wait).Before(next) {
			next = now.Add(wait)
		}
		now = next
	}
	return out
}
