package composite

import (
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
)

// bench watches a camera left out for sending no keyframe: a tap of its
// track that only looks for one, so the camera comes back as soon as it
// can be decoded (and not, stalling the picture again, before).
type bench struct {
	mime  string
	seen  atomic.Bool
	ask   time.Time // when to ask the camera for a keyframe again
	untap func()
}

// Deliver notes whether the packet starts a keyframe; it takes the
// caller's reference.
func (b *bench) Deliver(pk *media.Packet, _ *broker.Track) {
	defer pk.Release()
	if b.seen.Load() {
		return
	}
	p := pk.Bytes()
	if off, ok := media.PayloadOffset(p); ok && off < len(p) && media.Keyframe(b.mime, p[off:]) {
		b.seen.Store(true)
	}
}

// benchLocked taps t to watch for its keyframe and asks for one (under mu).
func (c *Composite) benchLocked(t *broker.Track, now time.Time) *bench {
	b := &bench{mime: ffmpeg.VideoStream(t, 0).MIME, ask: now.Add(askEvery)}
	b.untap = c.room.Tap(t, "composite:"+c.id+":bench:"+t.ID(), b)
	t.RequestKeyframe()
	return b
}
