package mixbench

import (
	"fmt"
	"math"

	"github.com/convene/convene/internal/codec"
)

// Codec is one of the benchmark's codecs as both servers name it.
type Codec struct {
	Name       string     // "g711", "opus": the report's name
	Spec       codec.Spec // the RTP codec the members send and receive
	ConveneMix string     // the link's "mix"
	JanusCodec string     // the AudioBridge participant's "codec"
	JanusRate  int        // the AudioBridge room's sampling_rate
}

// Codecs are the benchmark's codecs by name.
var Codecs = map[string]Codec{
	"g711": {Name: "g711", Spec: codec.PCMU, ConveneMix: "PCMU", JanusCodec: "pcmu", JanusRate: 8000},
	"opus": {Name: "opus", Spec: codec.Opus, ConveneMix: "opus/48000/2", JanusCodec: "opus", JanusRate: 48000},
}

// framesPerLoop is the length of a speaker's recording: one second, which a
// tone of a whole number of hertz and a 4 Hz envelope fill exactly, so the
// loop has no seam.
const framesPerLoop = 50

// speech is a speaker's recording, encoded once and replayed.
type speech struct {
	frames  [][]byte // framesPerLoop payloads
	silence []byte   // one frame of silence
}

// record encodes one second of a freq Hz tone whose loudness rises and
// falls four times a second (a syllable rate), about -16 dBFS at its peak,
// and one frame of silence.
func record(c Codec, freq float64) (speech, error) {
	enc, err := codec.NewEncoder(c.Spec)
	if err != nil {
		return speech{}, err
	}
	n := c.Spec.FrameSamples()
	pcm := make([]int16, n)
	buf := make([]byte, 1500)
	var s speech
	for f := range framesPerLoop {
		for i := range pcm {
			t := float64(f*n+i) / float64(c.Spec.Rate)
			env := 0.55 + 0.45*math.Sin(2*math.Pi*4*t)
			pcm[i] = int16(5200 * env * math.Sin(2*math.Pi*freq*t))
		}
		k, err := enc.Encode(pcm, buf)
		if err != nil {
			return speech{}, fmt.Errorf("encode %s: %w", c.Name, err)
		}
		s.frames = append(s.frames, append([]byte(nil), buf[:k]...))
	}
	clear(pcm)
	k, err := enc.Encode(pcm, buf)
	if err != nil {
		return speech{}, err
	}
	s.silence = append([]byte(nil), buf[:k]...)
	return s, nil
}
