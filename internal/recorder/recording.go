package recorder

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// ErrExists is returned by Start for a directory that holds a recording.
var ErrExists = errors.New("recorder: the directory already holds a recording")

// Recording is the recording of one session's room.
type Recording struct {
	room  *broker.Room
	dir   string
	o     Options
	tapID string
	kinds [2]string // the member IDs joined to hear RTCP and new tracks
	start time.Time // the time line's zero (wall clock with a monotonic reading)
	q     chan item
	sink  broker.Sink

	mu       sync.Mutex // guards the fields below; taken before the room's mutex
	taps     map[*broker.Track]func()
	pending  []Event // events the writer has not taken yet
	stopping bool

	dropped  [len(dropReasons)]atomic.Uint64
	dropCtr  [len(dropReasons)]prometheus.Counter
	closed   atomic.Bool // taps release at once (stopped or failed)
	failed   atomic.Bool // a write failed
	packets  atomic.Uint64
	bytes    atomic.Uint64
	nstreams atomic.Int64
	fsyncs   atomic.Uint64 // files the syncer made durable (a syncfs round covers several)

	stopc chan struct{}
	done  chan struct{}
	err   error // why the writer stopped early; read after done
}

// item is a packet waiting for the writer with its arrival time.
type item struct {
	p  *media.Packet
	t  *broker.Track // nil for RTCP
	at time.Duration // since start
}

// Start records room into dir, which it creates (it may exist if it is
// empty). It taps every track of the room now and later until Stop. The
// returned Recording's files are the writer goroutine's; read them once
// Stop returned (or with ReadManifest and an rtpdump.Reader, which see
// what was flushed).
func Start(room *broker.Room, dir string, o Options) (*Recording, error) {
	o = o.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrExists, dir)
	}
	var id [6]byte
	rand.Read(id[:])
	r := &Recording{room: room, dir: dir, o: o, tapID: "recorder:" + hex.EncodeToString(id[:]),
		start: o.Now(), q: make(chan item, o.Queue), taps: map[*broker.Track]func(){},
		stopc: make(chan struct{}), done: make(chan struct{})}
	// The header keeps microseconds; the time line's zero is that instant.
	r.start = r.start.Add(-time.Duration(r.start.Nanosecond() % 1000))
	for i, reason := range dropReasons {
		r.dropCtr[i] = o.Metrics.dropped.WithLabelValues(reason)
	}
	r.sink = broker.SinkFunc(r.deliver)
	w, err := newWriter(r)
	if err != nil {
		return nil, err
	}
	r.Event(Event{Kind: RecordingStarted, Detail: room.ID()})
	go w.run()
	o.Metrics.recordings.Inc()

	discard := broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release() })
	rtcp := broker.SinkFunc(r.deliver)
	for _, k := range []media.Kind{media.Audio, media.Video} {
		id := r.tapID + "/" + k.String()
		// A member that sends nothing: it hears the kind's RTCP, and
		// OnChange tells it of new tracks in the main session (the taps,
		// not this subscription, carry their packets: its sink discards).
		if _, err := room.Join(broker.Member{ID: id, Kind: k, Receives: true, Layered: true,
			Sink: discard, RTCPSink: rtcp, OnChange: r.scan}); err != nil {
			r.Stop()
			return nil, err
		}
		r.mu.Lock()
		r.kinds[k] = id
		r.mu.Unlock()
	}
	r.scan()
	return r, nil
}

// Dir returns the recording's directory.
func (r *Recording) Dir() string { return r.dir }

// Started returns the wall-clock time the recording's time line starts at.
func (r *Recording) Started() time.Time { return r.start }

// deliver queues a packet; it never blocks. RTCP comes with from == nil.
func (r *Recording) deliver(p *media.Packet, from *broker.Track) {
	if r.closed.Load() {
		if r.failed.Load() {
			r.drop(dropFailed)
		}
		p.Release()
		return
	}
	select {
	case r.q <- item{p: p, t: from, at: r.o.Now().Sub(r.start)}:
	default:
		r.drop(dropQueueFull)
		p.Release()
	}
}

func (r *Recording) drop(reason string) {
	for i, x := range dropReasons {
		if x == reason {
			r.dropped[i].Add(1)
			r.dropCtr[i].Inc()
		}
	}
}

// scan taps the room's tracks not tapped yet and forgets those that left.
// It runs from OnChange (before a new main-session track's first packet)
// and on the writer's flush timer (tracks in subgroups, which OnChange
// does not announce to a main-session member).
//
// A video track tapped mid-stream is asked for a keyframe (after the lock:
// the request calls into its publisher's link), so that its recording
// can be decoded from its start rather than from the publisher's next
// keyframe, which a browser sends only when asked.
func (r *Recording) scan() {
	var video []*broker.Track
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	live := map[*broker.Track]bool{}
	for _, t := range r.room.Tracks() {
		live[t] = true
		if r.taps[t] == nil {
			r.taps[t] = r.room.Tap(t, r.tapID, r.sink)
			if t.Kind() == media.Video {
				video = append(video, t)
			}
		}
	}
	for t := range r.taps {
		if !live[t] {
			delete(r.taps, t) // its track is gone, and the tap with it
		}
	}
	r.mu.Unlock()
	for _, t := range video {
		t.RequestKeyframe()
	}
}

// detach untaps every track and leaves the room; idempotent.
func (r *Recording) detach() {
	r.closed.Store(true)
	r.mu.Lock()
	r.stopping = true
	taps, kinds := r.taps, r.kinds
	r.taps, r.kinds = map[*broker.Track]func(){}, [2]string{}
	r.mu.Unlock()
	for _, untap := range taps {
		untap()
	}
	for _, id := range kinds {
		if id != "" {
			r.room.Leave(id)
		}
	}
}

// Event appends e to the recording's time line, stamping At and OffsetMS
// when they are zero. It never blocks on the disk: the writer takes the
// event at its next flush. Events after the recording ended are dropped.
func (r *Recording) Event(e Event) {
	select {
	case <-r.done:
		return
	default:
	}
	now := r.o.Now()
	if e.At.IsZero() {
		e.At = now
	}
	if e.OffsetMS == 0 {
		e.OffsetMS = offsetMS(e.At.Sub(r.start))
	}
	e.At = e.At.UTC()
	r.mu.Lock()
	r.pending = append(r.pending, e)
	r.mu.Unlock()
}

func (r *Recording) takeEvents() []Event {
	r.mu.Lock()
	evs := r.pending
	r.pending = nil
	r.mu.Unlock()
	return evs
}

// Stop ends the recording: untaps, writes what is queued, the sidecars
// and the manifest (state finished, or failed), fsyncs and closes the
// files. It returns the write error that stopped the recording early, if
// any. Calling it again waits for the first call and returns the same.
func (r *Recording) Stop() error {
	r.detach()
	r.mu.Lock()
	select {
	case <-r.stopc:
	default:
		close(r.stopc)
	}
	r.mu.Unlock()
	<-r.done
	return r.err
}

// Done is closed when the writer goroutine has ended: after Stop, or
// after a write error (then Err says why).
func (r *Recording) Done() <-chan struct{} { return r.done }

// Err returns the write error that stopped the recording, once Done is
// closed; nil before or after a clean Stop.
func (r *Recording) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Stats are a recording's counters.
type Stats struct {
	Packets uint64 // RTP and RTCP packets written
	Bytes   uint64
	Streams int
	// Dropped counts packets not recorded, by reason (queue_full: the
	// disk is too slow).
	Dropped map[string]uint64
}

// Stats returns the recording's counters.
func (r *Recording) Stats() Stats {
	s := Stats{Packets: r.packets.Load(), Bytes: r.bytes.Load(), Streams: int(r.nstreams.Load()),
		Dropped: map[string]uint64{}}
	for i, reason := range dropReasons {
		if n := r.dropped[i].Load(); n > 0 {
			s.Dropped[reason] = n
		}
	}
	return s
}

func offsetMS(d time.Duration) uint32 {
	if d < 0 {
		return 0
	}
	return uint32(d / time.Millisecond)
}
