package loadgen

import (
	"math/rand/v2"
	"time"

	"github.com/convene/convene/internal/media"
)

// Kind of a stream: the broker's media kinds.
type Kind = media.Kind

// Stream kinds.
const (
	Audio = media.Audio
	Video = media.Video
)

// Item is one packet of a stream: when to send it relative to the stream's
// start, how big it is, and its RTP marker and timestamp.
type Item struct {
	At     time.Duration
	Size   int
	Marker bool
	TS     uint32
}

// Stream yields the packets of one speaker, forever.
type Stream interface {
	Next() Item
	Kind() Kind
}

// AudioPacketSize and AudioInterval are the seed's audio stream.
const (
	AudioPacketSize = 252
	AudioInterval   = 30 * time.Millisecond
)

type audio struct{ n int }

// NewAudio returns the seed's audio stream: 252 bytes every 30 ms (PCMU at
// 8 kHz would be 240 samples per packet).
func NewAudio() Stream { return &audio{} }

func (a *audio) Kind() Kind { return Audio }

func (a *audio) Next() Item {
	it := Item{At: time.Duration(a.n) * AudioInterval, Size: AudioPacketSize, TS: uint32(a.n * 240), Marker: a.n == 0}
	a.n++
	return it
}

// Video trace parameters.
const (
	VideoFPS        = 15
	VideoIntraEvery = 60  // frames between full-picture updates
	videoMaxPacket  = 860 // frames over this are split (≈1 KB with headers on the wire)
)

type video struct {
	rng   *rand.Rand
	frame int
	queue []Item
}

// NewVideo returns the synthetic H.263-like trace. The same seed gives the
// same trace.
func NewVideo(seed uint64) Stream {
	return &video{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (v *video) Kind() Kind { return Video }

func (v *video) Next() Item {
	for len(v.queue) == 0 {
		v.genFrame()
	}
	it := v.queue[0]
	v.queue = v.queue[1:]
	return it
}

// genFrame appends the packets of the next frame, sent back to back.
func (v *video) genFrame() {
	at := time.Duration(v.frame) * time.Second / VideoFPS
	ts := uint32(v.frame * 90000 / VideoFPS)
	var n, size int
	if v.frame%VideoIntraEvery == 0 {
		n = 10 + v.rng.IntN(9) // 10–18 packets of a full-picture update
		size = 900 + v.rng.IntN(100)
	} else {
		// Inter frames: mostly 1–3 KB, a few larger on motion.
		bytes := 1200 + v.rng.IntN(1500)
		if v.rng.IntN(10) == 0 {
			bytes += 1000 + v.rng.IntN(1500)
		}
		n = (bytes + videoMaxPacket - 1) / videoMaxPacket
		size = bytes / n
	}
	for i := 0; i < n; i++ {
		v.queue = append(v.queue, Item{At: at, Size: max(size, HeaderLen), Marker: i == n-1, TS: ts})
	}
	v.frame++
}
