package broker

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/convene/convene/internal/media"
)

// Joiner makes the packets of successive sources one stream for its sink,
// as a OneStream member's layerPick does for the tracks of the room: a
// source other than the current one takes over on its keyframe (its
// packets before are dropped), and from the first change on each packet
// is a copy with the first source's SSRC and sequence numbers and
// timestamps that run on. A video link that follows the speaker through
// transcoders (each camera's output a source of its own) gives its
// endpoint one stream this way.
type Joiner struct {
	sink  Sink
	codec string // MIME type, for keyframes
	rate  uint32

	mu  sync.Mutex
	cur *Track
	out continuity
}

// NewJoiner joins sources of codec (a MIME type) at rate for sink.
func NewJoiner(sink Sink, codec string, rate uint32) *Joiner {
	if rate == 0 {
		rate = 90000
	}
	return &Joiner{sink: sink, codec: codec, rate: rate}
}

// Deliver passes p on if it is of the current source, or starts a new
// source's turn with its keyframe.
func (j *Joiner) Deliver(p *media.Packet, from *Track) {
	b := p.Bytes()
	if len(b) < 12 {
		p.Release()
		return
	}
	now := time.Now()
	j.mu.Lock()
	if from != j.cur {
		off, ok := media.PayloadOffset(b)
		if !ok || off >= len(b) || !media.Keyframe(j.codec, b[off:]) {
			j.mu.Unlock()
			p.Release()
			return
		}
		if j.cur != nil && j.out.started {
			j.out.change(binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:]), now, j.rate)
		}
		j.cur = from
	}
	seq, ts := j.out.next(binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:]), now)
	out := j.out.copyOf(p, seq, ts)
	j.mu.Unlock()
	if out != nil {
		p.Release()
		p = out
	}
	j.sink.Deliver(p, from)
}
