package mixer

import (
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
)

// input is one track of the mixer's group: its packets decoded into a
// jitter buffer by the sender's goroutine, taken out a frame a tick.
type input struct {
	track *broker.Track
	owner string
	spec  codec.Spec

	mu      sync.Mutex
	dec     codec.Decoder
	jb      *audio.JitterBuffer
	scratch []int16 // a decoded packet
	frames  framer
	last    time.Time

	// The mixer's goroutine's own.
	raw      []int16 // a frame at the codec's rate
	frame    []int16 // a frame at the mixing rate
	rs       *audio.Resampler
	rsRate   int
	loud     float64 // smoothed loudness, 0 (silence) to 127
	quiet    int     // ticks in a row below the speaking threshold
	speaking bool
}

// specOf is the codec of a track: from what its sender said, else its
// payload type (static G.711, G.722), else the link's configured one.
func specOf(t *broker.Track, fallback codec.Spec) (codec.Spec, bool) {
	info := t.Info()
	pt, havePT := t.PayloadType()
	switch c := strings.ToLower(info.Codec); {
	case c == "audio/opus":
		s := codec.Opus
		if havePT {
			s.PT = pt
		}
		return s, true
	case c == "audio/pcmu":
		return codec.PCMU, true
	case c == "audio/pcma":
		return codec.PCMA, true
	case c == "audio/g722":
		return codec.G722, true
	}
	if havePT {
		switch pt {
		case 0:
			return codec.PCMU, true
		case 8:
			return codec.PCMA, true
		case 9:
			return codec.G722, true
		}
		if fallback.Name != "" && fallback.PT == pt {
			return fallback, true
		}
	}
	return codec.Spec{}, false
}

func newInput(t *broker.Track, spec codec.Spec, depth int) (*input, error) {
	dec, err := codec.NewDecoder(spec)
	if err != nil {
		return nil, err
	}
	fs := spec.FrameSamples()
	return &input{track: t, owner: t.Owner(), spec: spec, dec: dec, jb: audio.NewJitterBuffer(fs, depth),
		scratch: make([]int16, 6*fs), raw: make([]int16, fs), frames: framer{size: uint32(fs)}}, nil
}

// rtpPayload returns an RTP packet's payload type, timestamp and payload.
func rtpPayload(b []byte) (pt uint8, ts uint32, payload []byte, ok bool) {
	if len(b) < 12 || b[0]>>6 != 2 {
		return 0, 0, nil, false
	}
	off := 12 + 4*int(b[0]&0x0f)
	if b[0]&0x10 != 0 {
		if len(b) < off+4 {
			return 0, 0, nil, false
		}
		off += 4 + 4*int(binary.BigEndian.Uint16(b[off+2:]))
	}
	end := len(b)
	if b[0]&0x20 != 0 && end > off {
		end -= int(b[end-1])
	}
	if off > end {
		return 0, 0, nil, false
	}
	return b[1] & 0x7f, binary.BigEndian.Uint32(b[4:]), b[off:end], true
}

// push decodes one RTP packet into the jitter buffer, in 20 ms frames.
func (in *input) push(b []byte, now time.Time) dropReason {
	pt, ts, payload, ok := rtpPayload(b)
	if !ok {
		return dropMalformed
	}
	if pt != in.spec.PT {
		return dropPayloadType // comfort noise, telephone events, an unannounced codec
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	n, err := in.dec.Decode(payload, in.scratch)
	if err != nil || n == 0 {
		return dropUndecodable
	}
	in.frames.add(in.spec.ToSamples(ts), in.scratch[:n], in.jb.Push) // framed in samples (G.722's clock runs at half its rate)
	in.last = now
	return dropNone
}

// framer cuts a stream of samples, in packets of any duration (ffmpeg's
// PCMU packets carry 23 ms), into 20 ms frames on a grid of timestamps
// anchored at the first packet, for the jitter buffer. A frame goes out
// when it is whole, or zero-filled once frames after it are whole.
type framer struct {
	size    uint32
	started bool
	base    uint32
	open    []openFrame // at most maxOpen, oldest first
}

type openFrame struct {
	ts     uint32
	pcm    []int16
	filled int
}

const maxOpen = 4

func (f *framer) add(ts uint32, pcm []int16, push func(uint32, []int16)) {
	if !f.started {
		f.started, f.base = true, ts
	}
	for len(pcm) > 0 {
		off := (ts - f.base) % f.size
		start := ts - off
		n := min(len(pcm), int(f.size-off))
		fr := f.frame(start, push)
		copy(fr.pcm[off:], pcm[:n])
		fr.filled += n
		pcm, ts = pcm[n:], ts+uint32(n)
	}
	// Whole frames go out, and the ones older than a whole one.
	last := -1
	for i, fr := range f.open {
		if fr.filled >= int(f.size) {
			last = i
		}
	}
	for i := 0; i <= last; i++ {
		push(f.open[i].ts, f.open[i].pcm)
	}
	f.open = f.open[last+1:]
}

// frame returns the open frame starting at ts, opening it if need be (and
// pushing out the oldest when too many are open).
func (f *framer) frame(ts uint32, push func(uint32, []int16)) *openFrame {
	for i := range f.open {
		if f.open[i].ts == ts {
			return &f.open[i]
		}
	}
	if len(f.open) == maxOpen {
		push(f.open[0].ts, f.open[0].pcm)
		f.open = f.open[1:]
	}
	fr := openFrame{ts: ts, pcm: make([]int16, f.size)}
	i := len(f.open)
	for i > 0 && int32(ts-f.open[i-1].ts) < 0 {
		i--
	}
	f.open = append(f.open, openFrame{})
	copy(f.open[i+1:], f.open[i:])
	f.open[i] = fr
	return &f.open[i]
}

// pop takes the next frame at the codec's rate; an input silent for a
// while plays silence and starts afresh when it talks again.
func (in *input) pop(now time.Time) (active bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if now.Sub(in.last) > idleAfter {
		clear(in.raw)
		if in.jb.Played+in.jb.Concealed > 0 {
			in.jb = audio.NewJitterBuffer(in.spec.FrameSamples(), in.jb.Depth())
		}
		return false
	}
	in.jb.Pop(in.raw)
	return true
}

// toRate resamples the frame just popped to the mixing rate.
func (in *input) toRate(rate int) {
	if len(in.frame) != rate/50 {
		in.frame = make([]int16, rate/50)
	}
	if in.spec.Rate == rate {
		copy(in.frame, in.raw)
		return
	}
	if in.rs == nil || in.rsRate != rate {
		in.rs, _ = audio.NewResampler(in.spec.Rate, rate)
		in.rsRate = rate
	}
	if in.rs == nil {
		clear(in.frame)
		return
	}
	n := in.rs.Resample(in.frame, in.raw)
	clear(in.frame[min(n, len(in.frame)):])
}
