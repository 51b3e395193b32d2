package hls

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/supervise"
)

// Errors of Start and Stop.
var (
	ErrCapacity  = errors.New("hls: the node runs as many HLS streams as it may (streaming.hls_max)")
	ErrNoSession = errors.New("hls: the session is not active on this node")
	ErrNotFound  = errors.New("hls: the session has no HLS stream")
	ErrNoFFmpeg  = errors.New("hls: ffmpeg is not installed (streaming.ffmpeg)")
)

// Playlist is the file name of a stream's (multivariant) playlist.
const Playlist = "index.m3u8"

// Options configure the Service.
type Options struct {
	// Dir holds one directory per stream.
	Dir string
	// FFmpeg is the ffmpeg binary; "ffmpeg".
	FFmpeg string
	// Max is how many streams the node runs at once; 4.
	Max int
	// SpeakerHold is the least time a member's camera stays shown before
	// another speaker's takes its place; 2 s.
	SpeakerHold time.Duration
	// Segment is the segments' least duration (the child makes a
	// keyframe every Segment, which starts the next); 1 s.
	Segment time.Duration
	// Part is the LL-HLS parts' least duration; 200 ms.
	Part time.Duration
	// Hold bounds how long a blocking playlist reload or a preload
	// hint's part is held before it is answered 503; 6 s.
	Hold time.Duration
	// HeldMax is how many such requests a stream holds at once (more
	// are 503 at once); 4000: an LL-HLS viewer holds two.
	HeldMax int
	// Rooms finds an active session's broker room (nil: not active).
	Rooms func(session string) *broker.Room
	// Mixers mix the session's audio for the stream.
	Mixers *mixer.Service
	// Composite, if set, starts a grid composite of a session's cameras
	// for a stream that shows it (StartOptions.Video "composite"): the
	// track's ID and how to stop it.
	Composite  func(session string) (track string, stop func(), err error)
	Supervisor *supervise.Supervisor
	// Events, if set, hears hls.started and hls.stopped, so every member
	// of the session sees it is broadcast.
	Events  Publisher
	Metrics *Metrics
	Logger  *slog.Logger
}

// Publisher announces a session's events; the node's events.Hub is one.
type Publisher interface {
	SessionEvent(sessionID string, typ event.Type, data any) error
}

// Info describes a running stream.
type Info struct {
	Session   string    `json:"session"`
	Playlist  string    `json:"playlist"` // the URL path viewers open with ?token=
	StartedAt time.Time `json:"started_at"`
	Video     string    `json:"video_track,omitempty"` // the camera it shows now
	Restarts  uint64    `json:"restarts"`
}

// Service runs the node's HLS streams, one per session at most.
type Service struct {
	o       Options
	mu      sync.Mutex
	streams map[string]*Stream
}

// NewService returns a service with no streams.
func NewService(o Options) *Service {
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.SpeakerHold <= 0 {
		o.SpeakerHold = 2 * time.Second
	}
	if o.Max <= 0 {
		o.Max = 4
	}
	if o.Segment <= 0 {
		o.Segment = time.Second
	}
	if o.Part <= 0 {
		o.Part = 200 * time.Millisecond
	}
	if o.Hold <= 0 {
		o.Hold = 6 * time.Second
	}
	if o.HeldMax <= 0 {
		o.HeldMax = 4000
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	// Streams do not outlive the node: what one left behind (a crash)
	// is removed.
	if o.Dir != "" {
		if err := os.RemoveAll(o.Dir); err != nil {
			o.Logger.Warn("hls: remove old streams", "dir", o.Dir, "err", err)
		}
	}
	return &Service{o: o, streams: map[string]*Stream{}}
}

// Videos a stream can show (StartOptions.Video).
const (
	VideoSpeaker   = "speaker"   // the active speaker's camera (the default)
	VideoComposite = "composite" // a 2×2 grid of the cameras (Options.Composite)
)

// ErrVideo is an unknown or unavailable StartOptions.Video.
var ErrVideo = errors.New(`hls: video must be "speaker" or "composite"`)

// StartOptions choose what a stream shows.
type StartOptions struct {
	Video string `json:"video,omitempty"`
}

// Start starts the HLS stream of an active session; a session that has
// one already gets it back with started false.
func (s *Service) Start(session string, so StartOptions) (info Info, started bool, err error) {
	info, started, err = s.begin(session, so)
	if started {
		s.publish(session, event.HLSStarted, info)
	}
	return info, started, err
}

// Resume starts, as Start does, a session's stream that ran on another
// node (it died) and announces nothing: the node announces hls.moved.
func (s *Service) Resume(session string, so StartOptions) (Info, bool, error) {
	return s.begin(session, so)
}

// begin starts a session's stream; Start and Resume announce it or not.
func (s *Service) begin(session string, so StartOptions) (info Info, started bool, err error) {
	switch so.Video {
	case "", VideoSpeaker:
	case VideoComposite:
		if s.o.Composite == nil {
			return Info{}, false, ErrVideo
		}
	default:
		return Info{}, false, ErrVideo
	}
	room := s.o.Rooms(session)
	if room == nil {
		return Info{}, false, ErrNoSession
	}
	if _, err := exec.LookPath(s.o.FFmpeg); err != nil {
		return Info{}, false, fmt.Errorf("%w: %v", ErrNoFFmpeg, err)
	}
	return s.add(session, room, so)
}

// add starts a session's stream under mu; Start announces it after.
func (s *Service) add(session string, room *broker.Room, so StartOptions) (Info, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[session]; st != nil {
		return st.info(), false, nil
	}
	if len(s.streams) >= s.o.Max {
		s.o.Metrics.refused.Inc()
		return Info{}, false, fmt.Errorf("%w (%d streams)", ErrCapacity, len(s.streams))
	}
	st, err := s.start(session, room, so)
	if err != nil {
		return Info{}, false, err
	}
	s.streams[session] = st
	s.o.Metrics.streams.Inc()
	return st.info(), true, nil
}

func (s *Service) publish(session string, typ event.Type, data any) {
	if s.o.Events == nil {
		return
	}
	if err := s.o.Events.SessionEvent(session, typ, data); err != nil {
		s.o.Logger.Warn("hls: publish event", "session", session, "event", typ, "err", err)
	}
}

// Stop ends a session's stream and removes its files.
func (s *Service) Stop(session string) error {
	if err := s.end(session); err != nil {
		return err
	}
	s.publish(session, event.HLSStopped, map[string]any{"session": session})
	return nil
}

// Drop ends, as Stop does, a session's stream that moved to another node
// (this one was taken for dead) and announces nothing: the stream goes on
// there.
func (s *Service) Drop(session string) error { return s.end(session) }

// end stops a session's stream; Stop and Drop announce it or not.
func (s *Service) end(session string) error {
	s.mu.Lock()
	st := s.streams[session]
	delete(s.streams, session)
	s.mu.Unlock()
	if st == nil {
		return ErrNotFound
	}
	st.close()
	s.o.Metrics.streams.Dec()
	return nil
}

// Sessions are the sessions whose streams run on the node.
func (s *Service) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.streams))
}

// Get describes a session's stream.
func (s *Service) Get(session string) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[session]
	if st == nil {
		return Info{}, false
	}
	return st.info(), true
}

// PID is the process ID of a session's ffmpeg child (0 if none runs):
// for tests and drills that kill it.
func (s *Service) PID(session string) int {
	s.mu.Lock()
	st := s.streams[session]
	s.mu.Unlock()
	if st == nil {
		return 0
	}
	return st.proc.PID()
}

// SetSpeakers tells a session's stream who speaks now (member IDs, the
// loudest first): it shows the first of them that has a camera.
func (s *Service) SetSpeakers(session string, members []string) {
	s.mu.Lock()
	st := s.streams[session]
	s.mu.Unlock()
	if st != nil && len(members) > 0 {
		st.mu.Lock()
		st.speakers = slices.Clone(members)
		st.mu.Unlock()
	}
}

// Close stops every stream.
func (s *Service) Close() {
	s.mu.Lock()
	ss := s.streams
	s.streams = map[string]*Stream{}
	s.mu.Unlock()
	for _, st := range ss {
		st.close()
		s.o.Metrics.streams.Dec()
	}
}

// Stream is one session's HLS stream.
type Stream struct {
	s       *Service
	session string
	room    *broker.Room
	dir     string
	started time.Time
	clock   *ffmpeg.Clock
	mux     *muxer
	held    holds
	answers answers
	vport   int
	detach  func()
	proc    *ffmpeg.Proc
	unwatch func()
	stop    chan struct{}
	done    chan struct{}

	mu       sync.Mutex
	speakers []string
	video    *broker.Track // shown now
	shownAt  time.Time     // when its member's camera came on (speakerHold)
	vfeed    *ffmpeg.Feed  // its feed (nil without a camera)
	untap    func()
	sdpVideo string // the camera's codec in the child's SDP ("" for none)
	// pin is the one track shown (a composite's), "" for the speaker's;
	// unpin stops that composite.
	pin   string
	unpin func()

	// A camera that makes no frame for Stall (it stopped sending, or
	// sends no keyframe) would stall the whole stream, the mix too (the
	// video leads the segments): the child shows the card until
	// cardUntil, then tries the camera again. childCard is what the
	// running child was started with; frames and framesAt the muxer's
	// count of frames and when it last grew (the run goroutine's).
	cardUntil time.Time
	childCard bool
	frames    uint64
	framesAt  time.Time
}

// Stall is how long a camera may make no frame before the stream shows
// the card instead; CardFor is how long it does before it tries the
// camera again.
const (
	Stall   = 6 * time.Second
	CardFor = 10 * time.Second
)

func (s *Service) start(session string, room *broker.Room, so StartOptions) (*Stream, error) {
	dir := filepath.Join(s.o.Dir, session)
	// A stream starts with an empty directory: what a stream before
	// (or a node before) left there is not this one's.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("hls: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("hls: %w", err)
	}
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		return nil, err
	}
	st := &Stream{s: s, session: session, room: room, dir: dir, started: time.Now(), clock: ffmpeg.NewClock(),
		vport: ports[0], held: holds{max: s.o.HeldMax}, stop: make(chan struct{}), done: make(chan struct{})}
	if so.Video == VideoComposite {
		if st.pin, st.unpin, err = s.o.Composite(session); err != nil {
			return nil, fmt.Errorf("hls: the composite: %w", err)
		}
	}
	// The child makes a keyframe every Segment; a keyframe a little
	// early (the timelines' jitter) still starts the next segment.
	st.mux, err = newMuxer(s.o.Segment*9/10, s.o.Part, s.o.Logger.With("session", session))
	if err != nil {
		st.dropPin()
		return nil, err
	}
	st.pickVideo()
	st.sdpVideo = st.sdpVideoLocked()
	if err := st.writeSDP(); err != nil {
		st.dropVideo()
		st.mux.close()
		st.dropPin()
		return nil, err
	}
	// The mix goes into the muxer as it is: Opus in fMP4.
	st.detach, err = s.o.Mixers.Attach(session, "", room, &mixer.Output{ID: "hls:" + session, Codec: codec.Opus, Sink: st.mux})
	if err != nil {
		st.dropVideo()
		st.mux.close()
		st.dropPin()
		return nil, fmt.Errorf("hls: the session's mix: %w", err)
	}
	st.proc = ffmpeg.Start(ffmpeg.ProcOptions{Name: "hls " + session, Path: s.o.FFmpeg, Args: st.args,
		OnStart: st.onStart, Rekey: st.askKeyframe, Logger: s.o.Logger})
	if s.o.Supervisor != nil {
		st.unwatch = s.o.Supervisor.Add("hls", "hls:"+session, st.status, st.proc.Kill)
	}
	go st.run()
	s.o.Logger.Info("hls stream started", "session", session, "dir", dir)
	return st, nil
}

func (st *Stream) info() Info {
	i := Info{Session: st.session, Playlist: "/hls/" + st.session + "/" + Playlist, StartedAt: st.started}
	st.mu.Lock()
	if st.video != nil {
		i.Video = st.video.ID()
	}
	st.mu.Unlock()
	if n := st.proc.Starts(); n > 1 {
		i.Restarts = n - 1
	}
	return i
}

// status: the child's input is the camera, or its own card without one.
func (st *Stream) status() supervise.Status {
	return supervise.Status{Kind: "hls", ID: "hls:" + st.session, Session: st.session, Beats: st.proc.Beats(), Inputs: 1, Outputs: 1}
}

// onStart runs when a child starts: it decodes video from a keyframe.
func (st *Stream) onStart() {
	st.s.o.Metrics.starts.Inc()
	st.mu.Lock()
	v := st.vfeed
	st.mu.Unlock()
	if v != nil {
		v.Restarted()
	}
}

// askKeyframe has the camera's feed ask for a keyframe again: the child
// has made no frame since it last asked (ffmpeg.Proc.Rekey).
func (st *Stream) askKeyframe() {
	st.mu.Lock()
	v := st.vfeed
	st.mu.Unlock()
	if v != nil {
		v.AskKeyframe()
	}
}

// Card is what the stream shows while the session has no camera: a
// black picture of Frame's size at 15 frames a second.
const Card = "color=c=black:s=640x360:r=15"

// Frame is every stream's picture size: a camera is scaled to fit it
// and padded. gohlslib names one init section for a stream's whole life
// (a new SPS replaces it under the same URI, which players do not fetch
// again), and MSE's avc1 takes no new parameter sets in band: a camera of
// another size, the card, a new child must not change them.
const Frame = "scale=640:360:force_original_aspect_ratio=decrease:force_divisible_by=2:flags=bilinear,pad=640:360:-1:-1,setsar=1"

// args are the child's arguments for the SDP written last: it decodes the
// camera (or makes the card), encodes H.264 with a keyframe every segment
// and no B-frames (so its decode and presentation orders agree), and
// sends it back to the muxer over RTP, its parameter sets in band before
// every keyframe. The frames keep their times (-fps_mode vfr: no frame
// is duplicated to a constant rate); -r 30 is the rate the encoder plans
// its bits for (and the most it passes), since the camera's own rate is
// not probed and ffmpeg would take the RTP clock's 90,000 instead.
func (st *Stream) args() []string {
	seg := strconv.FormatFloat(st.s.o.Segment.Seconds(), 'f', -1, 64)
	a := append([]string{"-hide_banner", "-nostdin", "-loglevel", "warning"}, ffmpeg.ProgressArgs...)
	st.mu.Lock()
	video := st.sdpVideo != "" && !time.Now().Before(st.cardUntil)
	st.childCard = !video
	st.mu.Unlock()
	if video {
		// The camera: a frame is enough to know its size (no frame rate
		// probing), so the first frames do not wait.
		a = append(a, "-protocol_whitelist", "file,udp,rtp", "-fflags", "+genpts+nobuffer", "-reorder_queue_size", "64",
			"-analyzeduration", "500000", "-probesize", "500000", "-fpsprobesize", "0",
			"-i", filepath.Join(st.dir, "stream.sdp"))
	} else {
		a = append(a, "-re", "-f", "lavfi", "-i", Card)
	}
	return append(a, "-map", "0:v", "-an", "-vf", Frame, "-fps_mode", "vfr", "-r", "30", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency",
		"-profile:v", "high", "-bf", "0", "-pix_fmt", "yuv420p", "-b:v", "800k", "-maxrate", "1200k", "-bufsize", "1600k",
		"-force_key_frames", "expr:gte(t,n_forced*"+seg+")", "-sc_threshold", "0", "-flags:v", "-global_header",
		"-bsf:v", "dump_extra=freq=keyframe",
		"-f", "rtp", "-payload_type", "96", "rtp://127.0.0.1:"+strconv.Itoa(st.mux.Port())+"?pkt_size=1200")
}

// writeSDP writes the child's input: the camera, if there is one (the
// card needs none: the file goes).
func (st *Stream) writeSDP() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	path := filepath.Join(st.dir, "stream.sdp")
	if st.sdpVideo == "" || st.vfeed == nil {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	return os.WriteFile(path, []byte(ffmpeg.SDP(st.vfeed.Stream())), 0o640)
}

// run watches the room every half second: the camera to show, sender
// reports, the session's end.
func (st *Stream) run() {
	defer close(st.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case now := <-t.C:
			if st.s.o.Rooms(st.session) != st.room {
				st.s.o.Logger.Info("hls stream ends with its session", "session", st.session)
				go func() { _ = st.s.Stop(st.session) }()
				return
			}
			st.pickVideo()
			st.mu.Lock()
			v, changed := st.vfeed, st.sdpVideoLocked() != st.sdpVideo
			if changed {
				st.sdpVideo = st.sdpVideoLocked()
			}
			st.mu.Unlock()
			if changed {
				// The child was started for another SDP: a new one
				// appends to the playlist after a discontinuity.
				if err := st.writeSDP(); err == nil {
					st.proc.Kill()
				}
			}
			if v != nil {
				v.Report(now)
			}
			st.proc.CheckKeyframes(now)
			st.checkStall(now)
		}
	}
}

// checkStall shows the card while the camera makes no frame, and the
// camera again after CardFor.
func (st *Stream) checkStall(now time.Time) {
	if f := st.mux.frames.Load(); f != st.frames || st.framesAt.IsZero() {
		st.frames, st.framesAt = f, now
	}
	st.mu.Lock()
	camera, card := st.sdpVideo != "", st.childCard
	switch {
	case camera && !card && now.Sub(st.framesAt) >= Stall:
		st.cardUntil = now.Add(CardFor)
	case camera && card && !st.cardUntil.IsZero() && !now.Before(st.cardUntil):
		st.cardUntil = time.Time{}
		st.framesAt = now // the camera's child has Stall to make a frame
	default:
		st.mu.Unlock()
		return
	}
	st.mu.Unlock()
	if card {
		st.s.o.Logger.Info("hls: the camera again after the card", "session", st.session)
	} else {
		st.s.o.Logger.Warn("hls: the camera made no frame; the card for a while", "session", st.session, "for", CardFor)
	}
	st.proc.Kill()
}

// pickVideo taps the camera to show: the pinned composite's track, else
// the first speaker's that has one (once the one shown has been on for
// Options.SpeakerHold), else the one shown now, else the first video track of the
// main session; of a simulcast camera, the layer
// broker.Room.Best names (the highest heard in the last 2 s), so it
// changes layers when that changes (the feed waits for the new one's
// keyframe and asks for it).
func (st *Stream) pickVideo() {
	var cams []*broker.Track
	for _, t := range st.room.Tracks() {
		if t.Kind() == media.Video && (st.pin == "" || t.ID() == st.pin) {
			cams = append(cams, t)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var want *broker.Track
	for _, sp := range st.speakers {
		for _, t := range cams {
			if t.Owner() == sp && t.Owner() != "" {
				want = t
				break
			}
		}
		if want != nil {
			break
		}
	}
	if want == nil && slices.Contains(cams, st.video) {
		want = st.video
	}
	// A member's camera stays on for Options.SpeakerHold at least:
	// speakers that take turns word by word would otherwise switch the
	// picture as often, and each switch waits for the new camera's
	// keyframe.
	if want != nil && st.video != nil && want.Owner() != st.video.Owner() &&
		slices.Contains(cams, st.video) && time.Since(st.shownAt) < st.s.o.SpeakerHold {
		want = st.video
	}
	if want == nil && len(cams) > 0 {
		want = cams[0]
	}
	if want != nil {
		want = st.room.Best(want)
	}
	if want == st.video {
		return
	}
	prev := st.video
	if st.untap != nil {
		st.untap()
		st.untap = nil
	}
	st.video = nil
	if st.vfeed != nil && (want == nil || ffmpeg.VideoStream(want, 0).MIME != st.vfeed.Stream().MIME) {
		st.vfeed.Close() // no camera, or another codec: another SDP
		st.vfeed = nil
	}
	if want == nil {
		return
	}
	if st.vfeed == nil {
		f, err := ffmpeg.NewFeed(ffmpeg.VideoStream(want, st.vport), st.clock)
		if err != nil {
			st.s.o.Logger.Warn("hls: video feed", "session", st.session, "err", err)
			return
		}
		st.vfeed = f
	}
	if prev == nil || prev.Owner() != want.Owner() {
		st.shownAt = time.Now()
	}
	st.video = want
	st.untap = st.room.Tap(want, "hls:"+st.session, st.vfeed)
	want.RequestKeyframe()
	st.s.o.Metrics.switches.Inc()
}

// sdpVideoLocked is the camera's codec the child's SDP must name ("" for
// none; under mu).
func (st *Stream) sdpVideoLocked() string {
	if st.vfeed == nil {
		return ""
	}
	return st.vfeed.Stream().MIME
}

func (st *Stream) dropVideo() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.untap != nil {
		st.untap()
		st.untap = nil
	}
	st.video = nil
	if st.vfeed != nil {
		st.vfeed.Close()
		st.vfeed = nil
	}
}

// dropPin stops the stream's composite, if it has one.
func (st *Stream) dropPin() {
	if st.unpin != nil {
		st.unpin()
		st.unpin = nil
	}
}

func (st *Stream) close() {
	close(st.stop)
	<-st.done
	if st.unwatch != nil {
		st.unwatch()
	}
	st.detach()
	st.dropVideo()
	st.dropPin()
	st.proc.Stop()
	st.mux.close()
	if err := os.RemoveAll(st.dir); err != nil {
		st.s.o.Logger.Warn("hls: remove directory", "dir", st.dir, "err", err)
	}
	st.s.o.Logger.Info("hls stream stopped", "session", st.session)
}
