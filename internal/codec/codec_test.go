package codec

import (
	"errors"
	"math"
	"testing"

	"github.com/convene/convene/internal/audio"
)

func tone(freq float64, rate, n int, amp float64, phase *float64) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(amp * math.Sin(*phase))
		*phase += 2 * math.Pi * freq / float64(rate)
	}
	return out
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Spec{
		"PCMU":            PCMU,
		"pcma/8000":       PCMA,
		"opus/48000/2":    Opus,
		"opus/48000/2:96": {Name: "opus", Rate: 48000, PT: 96},
		"L16/8000:97":     {Name: "L16", Rate: 8000, PT: 97},
		"G722/8000":       G722, // a 16 kHz codec on an 8 kHz RTP clock
		"g722:9":          G722,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G729", "PCMU/16000", "G722/16000", "L16/44100", "opus/48000/2:200", "opus/48000/6", "PCMU:x"} {
		if _, err := Parse(bad); !errors.Is(err, ErrUnknown) {
			t.Errorf("Parse(%q): %v, want ErrUnknown", bad, err)
		}
	}
}

// TestRoundTrip: a 1 kHz tone through each codec's encoder and decoder
// comes back as a 1 kHz tone at about its level.

// TestG722IsWideband: G.722 keeps a 6 kHz tone (over G.711's 4 kHz band)
// and its 20 ms packet is 160 bytes on a clock that advances 160.
func TestG722IsWideband(t *testing.T) {
	enc, _ := NewEncoder(G722)
	dec, _ := NewDecoder(G722)
	var phase float64
	var out []int16
	buf := make([]byte, 1500)
	pcm := make([]int16, 2*G722.FrameSamples())
	for range 50 {
		n, err := enc.Encode(tone(6000, 16000, G722.FrameSamples(), 8000, &phase), buf)
		if err != nil || n != 160 {
			t.Fatalf("encode: %d bytes, %v", n, err)
		}
		m, err := dec.Decode(buf[:n], pcm)
		if err != nil || m != 320 {
			t.Fatalf("decode: %d samples, %v", m, err)
		}
		out = append(out, pcm[:m]...)
	}
	if sh := audio.ToneShare(out[len(out)/2:], 6000, 16000); sh < 0.8 {
		t.Fatalf("6 kHz holds %.2f of the decoded energy", sh)
	}
	if G722.FrameTicks() != 160 || G722.ToSamples(160) != 320 {
		t.Fatalf("G.722 frame: %d ticks, %d samples", G722.FrameTicks(), G722.ToSamples(160))
	}
}
func TestRoundTrip(t *testing.T) {
	for _, s := range []Spec{PCMU, PCMA, {Name: "L16", Rate: 16000, PT: 96}, Opus, G722} {
		t.Run(s.Name, func(t *testing.T) {
			enc, err := NewEncoder(s)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := NewDecoder(s)
			if err != nil {
				t.Fatal(err)
			}
			var phase float64
			var out []int16
			buf := make([]byte, 1500)
			pcm := make([]int16, s.FrameSamples())
			for range 50 {
				n, err := enc.Encode(tone(1000, s.Rate, s.FrameSamples(), 8000, &phase), buf)
				if err != nil {
					t.Fatal(err)
				}
				m, err := dec.Decode(buf[:n], pcm)
				if err != nil || m != s.FrameSamples() {
					t.Fatalf("decode: %d samples, %v", m, err)
				}
				out = append(out, pcm[:m]...)
			}
			tail := out[len(out)/2:] // past the codec's start-up
			if sh := audio.ToneShare(tail, 1000, s.Rate); sh < 0.9 {
				t.Fatalf("1 kHz holds %.2f of the decoded energy", sh)
			}
			var e float64
			for _, v := range tail {
				e += float64(v) * float64(v)
			}
			if rms := math.Sqrt(e / float64(len(tail))); rms < 8000/math.Sqrt2*0.7 || rms > 8000/math.Sqrt2*1.3 {
				t.Fatalf("level %.0f RMS, sent %.0f", rms, 8000/math.Sqrt2)
			}
		})
	}
}

// FuzzDecode: no payload crashes a decoder; bad ones are errors.
func FuzzDecode(f *testing.F) {
	f.Add(byte(0), []byte{0xff, 0x7f})
	f.Add(byte(3), []byte{0xfc, 0xff, 0xfe})
	f.Add(byte(2), []byte{1})
	specs := []Spec{PCMU, PCMA, {Name: "L16", Rate: 8000, PT: 96}, Opus, G722}
	decs := make([]Decoder, len(specs))
	for i, s := range specs {
		d, err := NewDecoder(s)
		if err != nil {
			f.Fatal(err)
		}
		decs[i] = d
	}
	f.Fuzz(func(t *testing.T, which byte, p []byte) {
		pcm := make([]int16, 5760) // 120 ms at 48 kHz, Opus's longest packet
		n, err := decs[int(which)%len(decs)].Decode(p, pcm)
		if err == nil && (n < 0 || n > len(pcm)) {
			t.Fatalf("decoded %d samples into %d", n, len(pcm))
		}
	})
}
