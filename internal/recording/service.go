package recording

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/ingest"
	"github.com/convene/convene/internal/recorder"
)

// Errors of the service, usable with errors.Is.
var (
	ErrNotFound = errors.New("recording not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
	ErrDraining = errors.New("node is draining")
	// ErrCapacity: the node's disk cannot take one more recording of this
	// size (answered 503 with Retry-After).
	ErrCapacity = errors.New("recording capacity reached")
	// ErrQuota: the owner's recordings take its quota (answered 507).
	ErrQuota = errors.New("recording quota reached")
)

// Operator is the owner of recordings the operator (an API key) starts.
const Operator = "operator"

// Limits of what callers write.
const (
	MaxTitle       = 200
	MaxDescription = 4000
)

// Rooms gives the broker room of an active session (nil if it has none);
// *session.Service is one.
type Rooms interface {
	Room(sessionID string) *broker.Room
}

// Attender is Rooms that can open a session's room on this node when
// nobody here takes part yet (session.Service.Attend): a recording placed
// on this node by load records what the room pulls from the others.
type Attender interface {
	Attend(ctx context.Context, sessionID string) (room *broker.Room, opened bool, err error)
}

// heardWait bounds how long a recording of a room just opened here waits
// to hear of the other nodes' tracks (their state comes every second)
// before it estimates what they need.
const heardWait = 2 * time.Second

// Publisher announces a session's events (recording.started, .stopped);
// the node's events.Hub is one.
type Publisher interface {
	SessionEvent(sessionID string, typ event.Type, data any) error
}

// Options configure a Service.
type Options struct {
	// Root holds one directory per recording.
	Root    string
	Catalog *catalog.Store
	Rooms   Rooms
	Events  Publisher
	// Capacity is what the node's disk takes for recordings, in bits per
	// second (ProbeDisk, or configured); 0 admits everything.
	Capacity float64
	// Quota caps the bytes of one owner's recordings; 0 for none.
	Quota int64
	// Present, if set, gives the events that open a recording's time line
	// (the members already in the session, as member_joined).
	Present func(sessionID string) []recorder.Event
	// Recorder are the options of every recording (its Metrics shared).
	Recorder recorder.Options
	// AdHocAddr is the IP ad-hoc recordings' endpoints bind (unset: the
	// node takes none); AdHocMax caps them (0 means 16).
	AdHocAddr netip.Addr
	AdHocMax  int
	Ingest    *ingest.Metrics
	Metrics   *Metrics
	Logger    *slog.Logger
	Now       func() time.Time
	// Node is the node's ID in a cluster (the session service's lease
	// holder); "" on a lone node. With a Node, a recording is the catalog's
	// to move: the session's owner continues one whose node died
	// (failover.go).
	Node string
}

// Service runs the node's recordings.
type Service struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex // guards live, moving, reserved, draining
	live     map[string]*running
	moving   map[string]bool // recordings being continued here (failover.go)
	reserved float64
	draining bool

	bg sync.WaitGroup // stops started by SessionEnded, watchers
}

// running is a recording being written.
type running struct {
	rec   *recorder.Recording
	cat   catalog.Recording // its Node and Segment are this node's segment
	dir   string            // this segment's directory (cat.Dir for the first)
	need  float64           // bits/s reserved
	ended chan struct{}     // closed once the end is stored
	// An ad-hoc recording's endpoint and private room (adhoc.go).
	ep      *ingest.Endpoint
	room    *broker.Room
	idle    time.Duration
	sources []netip.Prefix
}

// stop ends the recording: an ad-hoc one's endpoint first, so that what
// it accepted is all recorded.
func (l *running) stop() {
	if l.ep != nil {
		l.ep.Close()
	}
	l.rec.Stop()
}

// New opens the service: it creates Root, repairs the recordings a
// crashed process left there and marks them interrupted in the catalog
// (with their size, duration and streams).
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Ingest == nil {
		o.Ingest = ingest.NewMetrics()
	}
	if o.AdHocMax <= 0 {
		o.AdHocMax = 16
	}
	if o.Recorder.Metrics == nil {
		o.Recorder.Metrics = recorder.NewMetrics()
	}
	if o.Recorder.Logger == nil {
		o.Recorder.Logger = o.Logger
	}
	if o.Root == "" || o.Catalog == nil {
		return nil, errors.New("recording: Root and Catalog are required")
	}
	if err := os.MkdirAll(o.Root, 0o700); err != nil {
		return nil, err
	}
	o.Metrics.capacity.Set(o.Capacity)
	s := &Service{o: o, log: o.Logger, live: map[string]*running{}, moving: map[string]bool{}}
	reps, err := recorder.Repair(o.Root)
	if err != nil {
		s.log.Error("repair recordings", "err", err) // the others are repaired: go on
	}
	for _, r := range reps {
		s.log.Warn("recording interrupted, repaired", "dir", r.Dir, "streams", r.Streams, "records", r.Records, "cut_bytes", r.Cut)
	}
	if err := s.reconcile(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// reconcile stores the end of every recording under Root that the
// catalog still has as recording: after Repair its manifest says how it
// ended (interrupted, or finished when the process died after the
// recorder finished but before the catalog heard).
func (s *Service) reconcile(ctx context.Context) error {
	recs, err := s.o.Catalog.ListRecordings(ctx, catalog.RecordingFilter{State: string(recorder.StateRecording)})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if s.o.Node != "" || !s.inRoot(r.Dir) {
			continue // another node's; in a cluster, reconcileSegments
		}
		end := s.ended(r, r.Dir, nil)
		if end.State == string(recorder.StateRecording) {
			end.State = string(recorder.StateInterrupted)
		}
		if err := s.o.Catalog.EndRecording(ctx, end); err != nil {
			return err
		}
		s.log.Info("recording marked "+end.State, "recording", r.ID, "session", r.SessionID)
	}
	return s.reconcileSegments(ctx)
}

// inRoot reports whether dir is a recording's directory right under Root.
func (s *Service) inRoot(dir string) bool {
	root, err := filepath.Abs(s.o.Root)
	if err != nil {
		return false
	}
	d, err := filepath.Abs(dir)
	return err == nil && filepath.Dir(d) == root && strings.HasPrefix(filepath.Base(d), "r_")
}

// ended fills in how r's segment in dir ended from its manifest on disk;
// rec, if the recording ran here, gives the error that stopped it.
func (s *Service) ended(r catalog.Recording, dir string, rec *recorder.Recording) catalog.Recording {
	m, err := recorder.ReadManifest(dir)
	end := s.o.Now().UTC()
	switch {
	case err != nil:
		r.State, r.Error = string(recorder.StateFailed), "manifest: "+err.Error()
	default:
		r.State, r.Error, r.Streams = string(m.State), m.Error, len(m.Streams)
		if m.Ended != nil {
			end = *m.Ended
		}
	}
	if rec != nil && rec.Err() != nil && r.Error == "" {
		r.State, r.Error = string(recorder.StateFailed), rec.Err().Error()
	}
	r.EndedAt = end
	r.Duration = max(end.Sub(r.StartedAt), 0)
	r.SizeBytes = dirSize(dir)
	return r
}

func newID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "r_" + hex.EncodeToString(b[:])
}

// NewRecording is what a caller asks to record.
type NewRecording struct {
	Session     string
	Owner       string // Operator or a member ID
	Title       string
	Description string
}

// Start records the session's room: admission (quota, then capacity),
// a catalog entry, the recorder, and recording.started on the session's
// events.
func (s *Service) Start(ctx context.Context, req NewRecording) (Recording, error) {
	if err := checkText(req.Title, req.Description); err != nil {
		return Recording{}, err
	}
	if req.Owner == "" {
		return Recording{}, fmt.Errorf("%w: no owner", ErrInvalid)
	}
	room, err := s.attend(ctx, req.Session)
	if err != nil {
		return Recording{}, err
	}
	l, err := s.launch(ctx, req, room, Estimate(room.Tracks()), len(room.Tracks()), nil)
	if err != nil {
		return Recording{}, err
	}
	// The session may have ended between roomOf and now; then its
	// SessionEnded found nothing to stop.
	if s.roomOf(req.Session) != room {
		go s.Stop(context.Background(), l.cat.ID)
	}
	return view(l.cat), nil
}

// launch admits a recording of room needing need bits/s for its tracks,
// stores it in the catalog and starts the recorder. open, if set, opens
// what feeds the room (an ad-hoc recording's endpoint) once admitted.
func (s *Service) launch(ctx context.Context, req NewRecording, room *broker.Room, need float64, tracks int,
	open func() (*ingest.Endpoint, error)) (*running, error) {
	if s.o.Quota > 0 {
		used, err := s.usage(ctx, req.Owner)
		if err != nil {
			return nil, err
		}
		if used >= s.o.Quota {
			s.o.Metrics.refused.WithLabelValues("quota").Inc()
			return nil, fmt.Errorf("%w: the recordings of %s take %d of %d bytes (recording.quota_mb); delete some first",
				ErrQuota, req.Owner, used, s.o.Quota)
		}
	}
	if err := s.reserve(need, tracks); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			s.release(need)
		}
	}()

	id := newID()
	cat := catalog.Recording{ID: id, SessionID: req.Session, Title: req.Title, Description: req.Description,
		Owner: req.Owner, State: string(recorder.StateRecording), Dir: filepath.Join(s.o.Root, id), Node: s.o.Node}
	rec, err := recorder.Start(room, cat.Dir, s.o.Recorder)
	if err != nil {
		os.RemoveAll(cat.Dir)
		return nil, fmt.Errorf("recording: start: %w", err)
	}
	if s.o.Present != nil && req.Session != "" {
		for _, e := range s.o.Present(req.Session) {
			rec.Event(e)
		}
	}
	var ep *ingest.Endpoint
	if open != nil {
		if ep, err = open(); err != nil {
			rec.Stop()
			os.RemoveAll(cat.Dir)
			return nil, err
		}
	}
	cat.StartedAt = rec.Started().UTC()
	if err := s.o.Catalog.CreateRecording(ctx, cat); err != nil {
		if ep != nil {
			ep.Close()
		}
		rec.Stop()
		os.RemoveAll(cat.Dir)
		return nil, err
	}
	cat, _ = s.o.Catalog.GetRecording(ctx, id) // as stored (ms)
	l := &running{rec: rec, cat: cat, dir: cat.Dir, need: need, ep: ep, ended: make(chan struct{})}
	if ep != nil {
		l.room = room
	}
	started = true // from here finish releases it
	if err := s.run(l); err != nil {
		return nil, err
	}
	s.publish(cat.SessionID, event.RecordingStarted, view(cat))
	s.log.Info("recording started", "recording", id, "session", req.Session, "owner", req.Owner, "reserved_bps", need)
	return l, nil
}

// attend is the session's room here, opened if need be (Attender); a room
// opened now is given up to heardWait to hear of the other nodes' tracks.
func (s *Service) attend(ctx context.Context, sessionID string) (*broker.Room, error) {
	if room := s.roomOf(sessionID); room != nil {
		return room, nil
	}
	a, ok := s.o.Rooms.(Attender)
	if !ok {
		return nil, fmt.Errorf("%w: session %s is not activated", ErrConflict, sessionID)
	}
	room, opened, err := a.Attend(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if opened {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for end := time.Now().Add(heardWait); len(room.Tracks()) == 0 && time.Now().Before(end); {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
	return room, nil
}

func (s *Service) roomOf(sessionID string) *broker.Room {
	if s.o.Rooms == nil {
		return nil
	}
	return s.o.Rooms.Room(sessionID)
}

func checkText(title, desc string) error {
	if len(title) > MaxTitle {
		return fmt.Errorf("%w: title longer than %d bytes", ErrInvalid, MaxTitle)
	}
	if len(desc) > MaxDescription {
		return fmt.Errorf("%w: description longer than %d bytes", ErrInvalid, MaxDescription)
	}
	return nil
}

// usage is the bytes an owner's recordings take: the stored sizes, and
// what its running recordings wrote so far.
func (s *Service) usage(ctx context.Context, owner string) (int64, error) {
	used, err := s.o.Catalog.RecordingBytes(ctx, owner)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	var dirs []string
	for _, l := range s.live {
		if l.cat.Owner == owner {
			dirs = append(dirs, l.dir)
		}
	}
	s.mu.Unlock()
	for _, d := range dirs {
		used += dirSize(d)
	}
	return used, nil
}

// reserve admits a recording needing need bits/s, or says why not.
func (s *Service) reserve(need float64, tracks int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return ErrDraining
	}
	if c := s.o.Capacity; c > 0 && s.reserved+need > c {
		s.o.Metrics.refused.WithLabelValues("capacity").Inc()
		return fmt.Errorf("%w: the session's %d tracks need an estimated %.2f Mb/s (128 kb/s per audio track, 2.5 Mb/s per video track), "+
			"and the node's recordings already reserve %.2f of its %.2f Mb/s disk capacity (recording.capacity_mbps)",
			ErrCapacity, tracks, need/1e6, s.reserved/1e6, c/1e6)
	}
	s.reserved += need
	s.o.Metrics.reserved.Set(s.reserved)
	return nil
}

// Free is the disk capacity, in bits/s, that recordings have not
// reserved here: what a recording placed on this node may need (0 while
// draining).
func (s *Service) Free() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return 0
	}
	return max(s.o.Capacity-s.reserved, 0)
}

func (s *Service) release(need float64) {
	s.mu.Lock()
	s.reserved = max(s.reserved-need, 0)
	s.o.Metrics.reserved.Set(s.reserved)
	s.mu.Unlock()
}

// run makes l one of the running recordings and watches it; if the
// service is draining it stops l at once, stores its end and returns
// ErrDraining.
func (s *Service) run(l *running) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		l.stop()
		s.finish(l)
		return ErrDraining
	}
	s.live[l.cat.ID] = l
	s.bg.Add(1)
	s.mu.Unlock()
	go s.watch(l)
	return nil
}

// watch waits for a recording to end, however it ends, and stores it.
func (s *Service) watch(l *running) {
	defer s.bg.Done()
	<-l.rec.Done()
	s.finish(l)
}

// finish stores a recording's end, frees its reservation and announces
// recording.stopped.
func (s *Service) finish(l *running) {
	if l.ep != nil { // the recorder may have failed by itself
		l.ep.Close()
		l.room.Close()
	}
	end := s.ended(l.cat, l.dir, l.rec)
	if end.State == string(recorder.StateRecording) { // the writer ended without a manifest state
		end.State = string(recorder.StateFailed)
	}
	err := s.o.Catalog.EndRecording(context.Background(), end)
	moved := errors.Is(err, catalog.ErrMoved)
	if err != nil && !moved {
		s.log.Error("store recording end", "recording", end.ID, "err", err)
	}
	s.mu.Lock()
	delete(s.live, end.ID)
	s.mu.Unlock()
	s.release(l.need)
	st := l.rec.Stats()
	if moved { // another node continues it (Fence): its segment here ended, not the recording
		s.log.Warn("recording segment handed over", "recording", end.ID, "session", end.SessionID,
			"segment", end.Segment, "bytes", end.SizeBytes, "packets", st.Packets)
		close(l.ended)
		return
	}
	if r, err := s.o.Catalog.GetRecording(context.Background(), end.ID); err == nil {
		end = r // the totals over every segment
	}
	s.publish(end.SessionID, event.RecordingStopped, view(end))
	s.log.Info("recording "+end.State, "recording", end.ID, "session", end.SessionID, "bytes", end.SizeBytes,
		"streams", end.Streams, "packets", st.Packets, "dropped", st.Dropped, "err", end.Error)
	close(l.ended)
}

func (s *Service) publish(sessionID string, typ event.Type, data any) {
	if s.o.Events == nil || sessionID == "" { // an ad-hoc recording has no session to tell
		return
	}
	if err := s.o.Events.SessionEvent(sessionID, typ, data); err != nil {
		s.log.Warn("publish recording event", "session", sessionID, "event", typ, "err", err)
	}
}

// Stop ends a running recording and returns it as stored; ErrConflict if
// it is not running (with its state), ErrNotFound if there is none.
func (s *Service) Stop(ctx context.Context, id string) (Recording, error) {
	s.mu.Lock()
	l := s.live[id]
	s.mu.Unlock()
	if l == nil {
		r, err := s.get(ctx, id)
		if err != nil {
			return Recording{}, err
		}
		if r.State == string(recorder.StateRecording) && r.Node != "" && r.Node != s.o.Node {
			return Recording{}, fmt.Errorf("%w: recording %s is written by node %s: stop it there", ErrConflict, id, r.Node)
		}
		return Recording{}, fmt.Errorf("%w: recording %s is %s", ErrConflict, id, r.State)
	}
	l.stop()
	select {
	case <-l.ended:
	case <-ctx.Done():
		return Recording{}, ctx.Err()
	}
	r, err := s.get(ctx, id)
	if err != nil {
		return Recording{}, err
	}
	return view(r), nil
}

// Note appends e to the time line of the session's running recordings.
// It runs under the session service's lock: it only queues the event.
func (s *Service) Note(sessionID string, e recorder.Event) {
	for _, l := range s.of(sessionID) {
		l.rec.Event(e)
	}
}

// SessionEnded stops the session's running recordings (its room is going
// away); it does not wait for them.
func (s *Service) SessionEnded(sessionID string) {
	s.mu.Lock()
	if s.draining { // Close stops them, and bg may be in Wait
		s.mu.Unlock()
		return
	}
	var ls []*running
	for _, l := range s.live {
		if l.cat.SessionID == sessionID {
			ls = append(ls, l)
		}
	}
	s.bg.Add(len(ls))
	s.mu.Unlock()
	for _, l := range ls {
		go func() {
			defer s.bg.Done()
			l.stop()
		}()
	}
}

func (s *Service) of(sessionID string) []*running {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*running
	for _, l := range s.live {
		if l.cat.SessionID == sessionID {
			out = append(out, l)
		}
	}
	return out
}

// Running counts the recordings being written.
func (s *Service) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// Close refuses new recordings, stops the running ones and waits until
// each is stored. Idempotent.
func (s *Service) Close() {
	s.mu.Lock()
	s.draining = true
	ls := make([]*running, 0, len(s.live))
	for _, l := range s.live {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.stop()
		}()
	}
	wg.Wait()
	s.bg.Wait()
}

func (s *Service) get(ctx context.Context, id string) (catalog.Recording, error) {
	r, err := s.o.Catalog.GetRecording(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return r, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return r, err
}
