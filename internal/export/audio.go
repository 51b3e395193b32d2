package export

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/codec"
)

// Rate is the sample rate of every exported audio track; Frame is the
// samples of one 20 ms frame at it.
const (
	Rate  = 48000
	Frame = Rate / 50
)

// slack is how far (in samples at Rate) a packet may start from where the
// previous one ended and still count as its continuation: a resampler's
// output length varies by a sample from frame to frame.
const slack = 4

// source decodes one audio stream to 48 kHz PCM placed on the time line.
type source struct {
	s      *Stream
	ps     *packets
	dec    codec.Decoder
	rs     *audio.Resampler // nil at 48 kHz
	pcm    []int16          // decoded, at the codec's rate
	up     []int16          // resampled
	buf    []int16          // samples from bufAt on; the next frame's come from here
	bufAt  int64            // sample index of buf[0] on the time line
	eof    bool
	Errors int // payloads that did not decode
}

func newSource(s *Stream) (*source, error) {
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.ToLower(s.Codec), "audio/"), "/")
	spec, err := codec.Parse(fmt.Sprintf("%s/%d", name, s.Rate))
	if err != nil {
		return nil, fmt.Errorf("export: stream %s: %w", s.Sidecar.File, err)
	}
	dec, err := codec.NewDecoder(spec)
	if err != nil {
		return nil, err
	}
	src := &source{s: s, dec: dec, pcm: make([]int16, 5760)} // 120 ms at 48 kHz: Opus' longest packet
	if spec.Rate != Rate {
		if src.rs, err = audio.NewResampler(spec.Rate, Rate); err != nil {
			return nil, err
		}
		src.up = make([]int16, src.rs.OutLen(len(src.pcm)))
	}
	if src.ps, err = openPackets(s); err != nil {
		return nil, err
	}
	return src, nil
}

func (src *source) Close() error { return src.ps.Close() }

// fill reads packets until buf reaches sample index end or the stream ends.
func (src *source) fill(end int64) error {
	for !src.eof && src.bufAt+int64(len(src.buf)) < end {
		p, err := src.ps.next()
		if errors.Is(err, io.EOF) {
			src.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		n, err := src.dec.Decode(p.Payload, src.pcm)
		if err != nil {
			src.Errors++
			continue
		}
		out := src.pcm[:n]
		if src.rs != nil {
			out = src.up[:src.rs.Resample(src.up, out)]
		}
		at := int64(src.s.At(p.Ticks) * Rate / time.Second)
		bufEnd := src.bufAt + int64(len(src.buf))
		switch {
		case len(src.buf) == 0 && at > src.bufAt:
			src.bufAt = at
		case at > bufEnd+slack: // lost packets: silence
			src.buf = append(src.buf, make([]int16, at-bufEnd)...)
		case at < bufEnd-slack: // a late or repeated packet: keep what is new
			skip := bufEnd - at
			if skip >= int64(len(out)) {
				continue
			}
			out = out[skip:]
		}
		src.buf = append(src.buf, out...)
	}
	return nil
}

// mixInto adds the samples of [at, at+len(sum)) to sum and drops every
// sample before at+len(sum).
func (src *source) mixInto(sum []int32, at int64) error {
	end := at + int64(len(sum))
	if err := src.fill(end); err != nil {
		return err
	}
	for i := range sum {
		j := at + int64(i) - src.bufAt
		if j >= 0 && j < int64(len(src.buf)) {
			sum[i] += int32(src.buf[j])
		}
	}
	if drop := end - src.bufAt; drop > 0 {
		if drop >= int64(len(src.buf)) {
			src.buf = src.buf[:0]
		} else {
			src.buf = append(src.buf[:0], src.buf[drop:]...)
		}
		src.bufAt = end
	}
	return nil
}

// mixer mixes every audio stream of a recording into 20 ms frames of
// 48 kHz mono, from the time line's zero to its Duration.
type mixer struct {
	srcs   []*source
	sum    []int32
	frame  []int16
	next   int64 // sample index of the next frame
	frames int64 // frames in all
}

func newMixer(rec *Recording) (*mixer, error) {
	m := &mixer{sum: make([]int32, Frame), frame: make([]int16, Frame),
		frames: int64((rec.Duration*Rate/time.Second + Frame - 1) / Frame)}
	for _, s := range rec.Audio {
		src, err := newSource(s)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.srcs = append(m.srcs, src)
	}
	return m, nil
}

// Frames is how many frames the mixer makes.
func (m *mixer) Frames() int64 { return m.frames }

// Next returns the next frame (the mixer's buffer, valid until the next
// call) and its time, or io.EOF after the last.
func (m *mixer) Next() ([]int16, time.Duration, error) {
	if m.next/Frame >= m.frames {
		return nil, 0, io.EOF
	}
	clear(m.sum)
	for _, src := range m.srcs {
		if err := src.mixInto(m.sum, m.next); err != nil {
			return nil, 0, err
		}
	}
	for i, v := range m.sum {
		m.frame[i] = audio.Sat16(v)
	}
	at := time.Duration(m.next) * time.Second / Rate
	m.next += Frame
	return m.frame, at, nil
}

func (m *mixer) Close() {
	for _, src := range m.srcs {
		src.Close()
	}
}
