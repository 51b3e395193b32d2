package recorder

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/convene/convene/internal/media"
)

// writer is the recording's goroutine: it alone writes the files (its
// syncer makes them durable).
type writer struct {
	r        *Recording
	streams  map[streamKey]*stream
	bySSRC   map[[2]uint32]*stream // (kind, SSRC) → the stream RTCP goes to
	list     []*stream
	events   *os.File
	timeline []Event
	man      Manifest
	manDirty bool   // the manifest's stream list grew since it was written
	slow     uint64 // queue_full drops when last looked
	err      error
	syncs    *syncer // nil when not started, and after stopSync
}

func newWriter(r *Recording) (*writer, error) {
	ev, err := os.OpenFile(filepath.Join(r.dir, EventsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	w := &writer{r: r, streams: map[streamKey]*stream{}, bySSRC: map[[2]uint32]*stream{}, events: ev,
		man: Manifest{Version: ManifestVersion, Session: r.room.ID(), State: StateRecording,
			Started: r.start.UTC(), Streams: []StreamEntry{}, Events: []Event{}}}
	if err := writeJSON(filepath.Join(r.dir, ManifestFile), &w.man, true); err != nil {
		ev.Close()
		return nil, err
	}
	return w, nil
}

func (w *writer) run() {
	r := w.r
	defer close(r.done)
	flush := time.NewTicker(r.o.FlushEvery)
	defer flush.Stop()
	var syncC <-chan time.Time
	if r.o.SyncEvery > 0 {
		t := time.NewTicker(r.o.SyncEvery)
		defer t.Stop()
		syncC = t.C
		w.startSync()
	}
	for w.err == nil {
		select {
		case it := <-r.q:
			w.packet(it)
		case <-flush.C:
			w.flush(false)
			r.scan()
		case <-syncC:
			w.requestSync()
		case <-r.stopc:
			w.finish()
			return
		}
	}
	w.fail()
}

// packet writes one queued packet to its stream and releases it.
func (w *writer) packet(it item) {
	defer it.p.Release()
	b := it.p.Bytes()
	if it.p.RTCP || it.t == nil {
		w.rtcp(it, b)
		return
	}
	// Kept as received: only an SSRC is needed to file it (the links
	// checked the rest, and a recording keeps what listeners got).
	if len(b) < 12 || b[0]>>6 != 2 {
		w.r.drop(dropMalformed)
		return
	}
	ssrc := binary.BigEndian.Uint32(b[8:])
	key := streamKey{it.t.ID(), ssrc}
	s := w.streams[key]
	if s == nil {
		if s = w.open(key, it.t.Kind(), ssrc, it); s == nil {
			return
		}
		if k := [2]uint32{uint32(it.t.Kind()), ssrc}; w.bySSRC[k] == nil || w.bySSRC[k].side.RTCPOnly {
			if early := w.bySSRC[k]; early != nil {
				// Sender reports that came before the RTP (ffmpeg sends
				// one first) map this stream's clock too: playback needs
				// them to keep streams in sync. They stay in their file.
				s.side.SenderReports = append(append([]SenderReport{}, early.side.SenderReports...), s.side.SenderReports...)
				s.dirty = true
			}
			w.bySSRC[k] = s
		}
	}
	s.sawPT(b[1] & 0x7f)
	if it.t.Kind() == media.Video && !s.keyed {
		w.awaitKeyframe(s, it, b)
	}
	w.write(s, it, b, false)
}

// keyframeRetry is how often a video stream that has had no keyframe yet
// asks for one again: the first request (when the track was tapped) may
// have been throttled by the sender's side, a keyframe having just gone
// to a listener, and a browser sends one only when asked, so a recording
// could otherwise hold seconds of video no player can start.
const keyframeRetry = 500 * time.Millisecond

func (w *writer) awaitKeyframe(s *stream, it item, b []byte) {
	codec := it.t.Info().Codec
	if codec == "" && len(s.side.PayloadTypes) > 0 {
		codec = s.side.PayloadTypes[0].Codec
	}
	if off, ok := media.PayloadOffset(b); ok && media.Keyframe(codec, b[off:]) {
		s.keyed = true
		return
	}
	if s.asked == 0 || it.at-s.asked >= keyframeRetry {
		s.asked = max(it.at, 1)
		it.t.RequestKeyframe()
	}
}

// rtcp writes a compound RTCP packet to the stream of its sender's SSRC
// (the first packet's) and keeps the sender reports' clock mapping.
func (w *writer) rtcp(it item, b []byte) {
	if media.ClassifyRTCP(b) != media.ClassRTCP || len(b) < 8 {
		w.r.drop(dropMalformed)
		return
	}
	ssrc := binary.BigEndian.Uint32(b[4:])
	k := [2]uint32{uint32(it.p.Kind), ssrc}
	s := w.bySSRC[k]
	if s == nil {
		key := streamKey{"rtcp/" + it.p.Kind.String(), ssrc}
		if s = w.open(key, it.p.Kind, ssrc, it); s == nil {
			return
		}
		w.bySSRC[k] = s
	}
	s.side.SenderReports = append(s.side.SenderReports, senderReports(b, offsetMS(it.at))...)
	w.write(s, it, b, true)
}

func (w *writer) write(s *stream, it item, b []byte, rtcp bool) {
	var err error
	if rtcp {
		err = s.w.WriteRTCP(offsetMS(it.at), b)
		s.side.RTCPPackets++
	} else {
		err = s.w.WriteRTP(offsetMS(it.at), b)
		s.side.Packets++
	}
	s.side.Bytes += uint64(len(b))
	if err != nil {
		w.err = fmt.Errorf("recorder: writing %s: %w", s.side.File, err)
		return
	}
	w.r.packets.Add(1)
	w.r.bytes.Add(uint64(len(b)))
	w.r.o.Metrics.packets.Inc()
	w.r.o.Metrics.bytes.Add(float64(len(b)))
}

// open creates a stream's files and puts it in the manifest.
func (w *writer) open(key streamKey, kind media.Kind, ssrc uint32, it item) *stream {
	r := w.r
	buf := r.o.BufferSize
	if kind == media.Video {
		buf *= videoBuffers // 5 Mb/s fills 16 KiB 40 times a second
	}
	s, err := newStream(r.dir, len(w.list)+1, r.start, buf, kind.String(), ssrc,
		it.t, r.start.Add(it.at), offsetMS(it.at))
	if err != nil {
		w.err = fmt.Errorf("recorder: %w", err)
		return nil
	}
	w.streams[key] = s
	w.list = append(w.list, s)
	r.nstreams.Add(1)
	r.o.Metrics.streams.Inc()
	w.man.Streams = append(w.man.Streams, s.entry())
	if err := writeJSON(s.sidecarPath(r.dir), &s.side, false); err != nil {
		w.err = fmt.Errorf("recorder: %w", err)
		return nil
	}
	s.dirty = false
	w.manDirty = true // written at the next flush: Repair finds streams by their files anyway
	r.Event(Event{At: r.start.Add(it.at), OffsetMS: offsetMS(it.at), Kind: StreamStarted,
		Member: s.side.Member, Stream: s.side.File})
	return s
}

// flush hands every stream's buffer to the kernel, then the time line's
// new events and changed sidecars, and notes a slow disk. On the timer
// (all false) a stream hands over whole pages and keeps the part of a page
// at the end of its buffer (a write that ends inside a page makes the file
// system zero the rest of it, and the next write fills it again), unless
// some of what it keeps was already buffered at the last tick: no byte
// waits more than two ticks.
func (w *writer) flush(all bool) {
	r := w.r
	for _, s := range w.list {
		var err error
		if all || s.w.Written() < s.kept {
			err = s.w.Flush()
		} else {
			err = s.w.FlushPages()
		}
		s.kept = s.w.Written() + int64(s.w.Buffered())
		if err != nil {
			w.err = fmt.Errorf("recorder: writing %s: %w", s.side.File, err)
			return
		}
	}
	if n := r.dropped[0].Load(); n > w.slow { // queue_full
		w.slow = n
		r.o.Metrics.slowDisk.Inc()
		r.o.Logger.Warn("recorder: the disk is too slow, packets dropped", "session", r.room.ID(),
			"dir", r.dir, "dropped", n)
		r.Event(Event{Kind: SlowDisk, Detail: fmt.Sprintf("%d packets dropped so far", n)})
		if r.o.OnSlowDisk != nil {
			r.o.OnSlowDisk(n)
		}
	}
	if err := w.writeEvents(); err != nil {
		w.err = err
		return
	}
	if w.manDirty {
		if err := writeJSON(filepath.Join(r.dir, ManifestFile), &w.man, false); err != nil {
			w.err = fmt.Errorf("recorder: %w", err)
			return
		}
		w.manDirty = false
	}
	for _, s := range w.list {
		if s.dirty {
			if err := writeJSON(s.sidecarPath(r.dir), &s.side, false); err != nil {
				w.err = fmt.Errorf("recorder: %w", err)
				return
			}
			s.dirty = false
		}
	}
}

// writeEvents appends the new events to events.jsonl (one write).
func (w *writer) writeEvents() error {
	evs := w.r.takeEvents()
	if len(evs) == 0 {
		return nil
	}
	var buf []byte
	for _, e := range evs {
		b, _ := json.Marshal(e)
		buf = append(append(buf, b...), '\n')
	}
	w.timeline = append(w.timeline, evs...)
	if _, err := w.events.Write(buf); err != nil {
		return fmt.Errorf("recorder: writing %s: %w", EventsFile, err)
	}
	return nil
}

// sync fsyncs the files written since the last sync, at once (the
// recording's end, after stopSync).
func (w *writer) sync() {
	for _, s := range w.list {
		if n := s.w.Written(); n != s.synced.Load() {
			if err := s.f.Sync(); err != nil {
				w.err = fmt.Errorf("recorder: syncing %s: %w", s.side.File, err)
				return
			}
			s.didSync(n)
		}
	}
	if err := w.events.Sync(); err != nil {
		w.err = fmt.Errorf("recorder: syncing %s: %w", EventsFile, err)
	}
}

// finish writes what is queued and closes the recording cleanly.
func (w *writer) finish() {
	r := w.r
	for w.err == nil {
		select {
		case it := <-r.q:
			w.packet(it)
			continue
		default:
		}
		break
	}
	if w.err == nil {
		r.Event(Event{Kind: RecordingStopped})
		w.flush(true)
	}
	w.stopSync()
	if w.err == nil {
		w.sync()
	}
	if w.err != nil {
		w.fail()
		return
	}
	w.close(StateFinished, "")
}

// fail stops the recording after a write error: no more taps, each file
// cut to its last whole record, the manifest marked failed.
func (w *writer) fail() {
	r := w.r
	w.stopSync()
	r.failed.Store(true)
	r.err = w.err
	r.o.Metrics.writeErrors.Inc()
	r.o.Logger.Error("recorder: recording stopped", "session", r.room.ID(), "dir", r.dir, "err", w.err)
	r.detach()
	for _, s := range w.list {
		if s.w.Flush() != nil {
			s.f.Truncate(s.w.Durable())
		}
	}
	w.drain()
	w.timeline = append(w.timeline, r.takeEvents()...)
	w.timeline = append(w.timeline, Event{At: r.o.Now().UTC(), OffsetMS: offsetMS(r.o.Now().Sub(r.start)),
		Kind: WriteError, Detail: w.err.Error()})
	w.close(StateFailed, w.err.Error())
	if r.o.OnError != nil {
		r.o.OnError(w.err)
	}
}

// drain releases what waits in the queue.
func (w *writer) drain() {
	for {
		select {
		case it := <-w.r.q:
			it.p.Release()
			w.r.drop(dropFailed)
		default:
			return
		}
	}
}

// close writes the final sidecars and manifest, best effort after a
// failure, and closes the files.
func (w *writer) close(state State, errText string) {
	r := w.r
	for _, s := range w.list {
		s.side.State = state
		writeJSON(s.sidecarPath(r.dir), &s.side, true)
		s.f.Close()
		r.o.Metrics.streams.Dec()
	}
	w.events.Close()
	end := r.o.Now().UTC()
	w.man.State, w.man.Ended, w.man.Error = state, &end, errText
	w.man.Events = append(w.man.Events, w.timeline...)
	w.man.Dropped = r.Stats().Dropped
	if err := writeJSON(filepath.Join(r.dir, ManifestFile), &w.man, true); err != nil && state == StateFinished {
		r.err = fmt.Errorf("recorder: %w", err)
	}
	syncDir(r.dir)
	r.o.Metrics.recordings.Dec()
}

// syncDir fsyncs a directory, so the names of new files are durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
