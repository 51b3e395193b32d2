package playback

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/export"
)

// stretch plays an audio stream at a speed other than 1 the way a person
// wants to hear it: faster or slower speech at its own pitch, in 20 ms
// packets that go out every 20 ms. Each recorded packet, when its place on
// the time line comes, is decoded and pushed into a WSOLA stretcher; the
// stretched audio is encoded again, in the stream's own codec, and sent
// frame by frame on the wall clock. (Sending the recorded packets faster
// or slower would hand receivers 20 ms of audio every 10 or 40 ms, which
// their jitter buffers drop or stretch as they please.)
type stretch struct {
	spec   codec.Spec
	dec    codec.Decoder
	enc    codec.Encoder
	st     *audio.Stretcher
	pt     uint8
	pcm    []int16 // a decoded packet (120 ms at most)
	frame  []int16 // one 20 ms frame
	pkt    []byte  // the packet being sent
	lastTS uint32  // the last decoded packet's timestamp and length in ticks
	lastN  uint32
	hasTS  bool
	due    time.Time // when the next frame goes out; zero: when it is ready
}

// maxFill is the longest gap in a stream (a silence without packets, a
// loss) filled with silence; after a longer one the stream starts again
// from its next packet.
const maxFill = time.Second

// newStretch returns the stretch of a stream, or nil for a codec the node
// cannot encode (such a stream is sent as recorded, its timestamps scaled).
func newStretch(s *export.Stream) *stretch {
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.ToLower(s.Codec), "audio/"), "/")
	spec, err := codec.Parse(fmt.Sprintf("%s/%d:%d", name, s.Rate, s.PT))
	if err != nil {
		return nil
	}
	dec, err := codec.NewDecoder(spec)
	if err != nil {
		return nil
	}
	enc, err := codec.NewEncoder(spec)
	if err != nil {
		return nil
	}
	return &stretch{spec: spec, dec: dec, enc: enc, pt: s.PT, st: audio.NewStretcher(spec.Rate, 1),
		pcm: make([]int16, spec.Rate*120/1000), frame: make([]int16, spec.FrameSamples()), pkt: make([]byte, 12+1500)}
}

// reset forgets the audio held (a seek, a speed change).
func (s *stretch) reset(speed float64) {
	s.st.Reset()
	s.st.SetSpeed(speed)
	s.hasTS, s.due = false, time.Time{}
}

// push decodes a recorded packet into the stretcher, after silence for a
// gap since the last one.
func (s *stretch) push(b []byte) {
	n := 12 + 4*int(b[0]&0x0f)
	if b[0]&0x10 != 0 && len(b) >= n+4 {
		n += 4 + 4*int(binary.BigEndian.Uint16(b[n+2:]))
	}
	if len(b) <= n {
		return
	}
	payload := b[n:]
	if b[0]&0x20 != 0 && int(b[len(b)-1]) < len(payload) {
		payload = payload[:len(payload)-int(b[len(b)-1])]
	}
	ts := binary.BigEndian.Uint32(b[4:])
	if s.hasTS {
		gap := int64(int32(ts-s.lastTS)) - int64(s.lastN) // ticks
		gapDur := time.Duration(gap) * time.Second / time.Duration(s.spec.RTPClock())
		switch {
		case gap < 0: // a packet out of order or repeated: its audio went by
			return
		case gapDur > maxFill:
			s.st.Reset()
			s.due = time.Time{}
		case gap > 0:
			s.st.Push(make([]int16, s.spec.ToSamples(uint32(gap))))
		}
	}
	n, err := s.dec.Decode(payload, s.pcm)
	if err != nil || n == 0 {
		return
	}
	s.lastTS, s.lastN, s.hasTS = ts, uint32(n*s.spec.RTPClock()/s.spec.Rate), true
	s.st.Push(s.pcm[:n])
}

// ready reports whether a whole frame is waiting.
func (s *stretch) ready() bool { return s.st.Available() >= len(s.frame) }

// wait is how long until the next frame may go, if one is ready.
func (s *stretch) wait(now time.Time) (time.Duration, bool) {
	if !s.ready() {
		return 0, false
	}
	if s.due.IsZero() {
		return 0, true
	}
	return max(s.due.Sub(now), 0), true
}

// send encodes and emits every frame due by now.
func (s *stretch) send(t *Track, now time.Time, emit Emit) {
	for s.ready() {
		if s.due.IsZero() || s.due.Before(now.Add(-100*time.Millisecond)) {
			s.due = now // the first frame of a run, or a frame long late: the clock starts again
		}
		if s.due.After(now) {
			return
		}
		s.st.Pull(s.frame)
		m, err := s.enc.Encode(s.frame, s.pkt[12:])
		s.due = s.due.Add(20 * time.Millisecond)
		if err != nil {
			continue
		}
		b := s.pkt[:12+m]
		b[0], b[1] = 0x80, s.pt
		t.rw.synth(b, uint32(s.spec.FrameTicks()), now)
		t.Sent++
		emit(t, b)
	}
}
