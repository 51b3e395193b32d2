package session

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/rtplink"
)

// VideoTranscoder gives a receiving video link that names its codec the
// cameras of another codec, transcoded (the node's vtranscode.Hub).
type VideoTranscoder interface {
	// Needs reports whether a receiver of codec (a MIME type) needs t
	// transcoded; known is false while t's codec is not known.
	Needs(t *broker.Track, codec string) (needs, known bool)
	// Subscribe makes out receive t in codec until stop.
	Subscribe(room *broker.Room, t *broker.Track, codec string, out broker.Sink) (stop func(), err error)
}

// retryRecode is how long a camera whose transcoder was refused waits
// before it is asked for again.
const retryRecode = 5 * time.Second

// recoder stands between the room and a receiving video link of one
// codec: a camera of that codec goes to the link as it is, one of another
// codec through a transcoder (started off the publisher's goroutine, on
// its first packet), never as bytes the endpoint cannot decode.
type recoder struct {
	vt    VideoTranscoder
	room  *broker.Room
	link  string
	codec string
	log   *slog.Logger
	out   atomic.Pointer[rtplink.Link] // set once the link is open
	// joiner, for a link that takes what it hears as one stream
	// (rtplink.Config.OneStream: a video phone following the speaker),
	// joins its cameras, each transcoder's output a source of its own,
	// into one stream: one SSRC, numbers that run on (set with out).
	joiner atomic.Pointer[broker.Joiner]

	mu     sync.Mutex
	subs   map[*broker.Track]*recodeSub
	closed bool
}

// recodeSub is one camera's transcoding: stop is nil while it starts or
// after it was refused (at refused).
type recodeSub struct {
	stop    func()
	refused time.Time
}

// open sets the link the recoder delivers to; oneStream joins its
// sources into one stream.
func (r *recoder) open(l *rtplink.Link, oneStream bool) {
	if oneStream {
		r.joiner.Store(broker.NewJoiner(l, r.codec, 90000))
	}
	r.out.Store(l)
}

// sink is where a camera's packets, transcoded or not, go: the link, or
// the joiner in front of it.
func (r *recoder) sink(l *rtplink.Link) broker.Sink {
	if j := r.joiner.Load(); j != nil {
		return j
	}
	return l
}

// Deliver passes a camera of the link's codec on and has the others
// transcoded; it never blocks.
func (r *recoder) Deliver(pk *media.Packet, from *broker.Track) {
	l := r.out.Load()
	needs, known := r.vt.Needs(from, r.codec)
	if l != nil && known && !needs {
		r.sink(l).Deliver(pk, from)
		return
	}
	pk.Release()
	if l == nil || !known {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.subs[from]; r.closed || (s != nil && (s.stop != nil || s.refused.IsZero() || time.Since(s.refused) < retryRecode)) {
		return
	}
	r.subs[from] = &recodeSub{}
	// Of a simulcast camera the room hands the link one layer at a time
	// (broker's layerPick): a packet of a new layer means it changed, and
	// the old layer's transcoder goes.
	var stops []func()
	src := broker.SourceOf(from)
	for t, s := range r.subs {
		if t != from && broker.SourceOf(t) == src {
			delete(r.subs, t)
			if s.stop != nil {
				stops = append(stops, s.stop)
			}
		}
	}
	go func() {
		for _, stop := range stops {
			stop()
		}
		r.start(from, l)
	}()
}

// start subscribes the link to a transcoder of t.
func (r *recoder) start(t *broker.Track, l *rtplink.Link) {
	stop, err := r.vt.Subscribe(r.room, t, r.codec, r.sink(l))
	r.mu.Lock()
	s := r.subs[t]
	if err != nil {
		r.log.Warn("link video transcode refused", "link", r.link, "track", t.ID(), "codec", r.codec, "err", err)
		if s != nil {
			s.refused = time.Now()
		}
		r.mu.Unlock()
		return
	}
	if r.closed || s == nil || !slices.Contains(r.room.Subscribed(r.link), t) {
		r.mu.Unlock()
		stop()
		return
	}
	s.stop = stop
	r.mu.Unlock()
}

// sync stops the transcoders of cameras the link no longer hears
// (broker.Member.OnChange).
func (r *recoder) sync() {
	now := r.room.Subscribed(r.link)
	var stops []func()
	r.mu.Lock()
	for t, s := range r.subs {
		if !slices.Contains(now, t) {
			delete(r.subs, t)
			if s.stop != nil {
				stops = append(stops, s.stop)
			}
		}
	}
	r.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// close stops every transcoder of the link.
func (r *recoder) close() {
	r.mu.Lock()
	r.closed = true
	subs := r.subs
	r.subs = map[*broker.Track]*recodeSub{}
	r.mu.Unlock()
	for _, s := range subs {
		if s.stop != nil {
			s.stop()
		}
	}
}
