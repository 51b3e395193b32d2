package composite

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/supervise"
)

// Errors of Start and Stop.
var (
	ErrInvalid   = errors.New("composite: invalid request")
	ErrLimit     = errors.New("composite: the node runs as many composites as it may (composite.max)")
	ErrCapacity  = errors.New("composite: the composites' measured CPU would pass composite.cores")
	ErrNoSession = errors.New("composite: the session is not active on this node")
	ErrNotFound  = errors.New("composite: no such composite")
	ErrExists    = errors.New("composite: a composite of that ID runs")
	ErrNoFFmpeg  = errors.New("composite: ffmpeg is not installed (streaming.ffmpeg)")
)

// DefaultFont is the font the cells' names are drawn in when it exists
// (Debian's fonts-dejavu-core); otherwise fontconfig's Sans.
const DefaultFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

// Member is a session member as a composite names it.
type Member struct{ ID, Name string }

// Options configure the Service.
type Options struct {
	// Dir holds a directory per composite (its SDP and names).
	Dir string
	// FFmpeg is the ffmpeg binary; "ffmpeg".
	FFmpeg string
	// Font is the names' font file; DefaultFont.
	Font string
	// Max is how many composites the node runs at once; 4.
	Max int
	// Cores is the CPU the composites' children may use, in cores, by
	// their measured load: a new one is refused when the running ones'
	// load plus one more's average would pass it. 0 means half the
	// node's CPUs.
	Cores float64
	// Rooms finds an active session's broker room (nil: not active).
	Rooms func(session string) *broker.Room
	// Members lists a session's members in join order.
	Members func(session string) []Member
	// Publish makes the track a composite publishes in a session, as a
	// member named name.
	Publish func(session, name string, info broker.TrackInfo) (Outlet, error)
	// Admit, if set, asks the node's capacity governor for pps packets/s
	// more (an error refuses the composite).
	Admit      func(what string, pps float64) error
	Supervisor *supervise.Supervisor
	Metrics    *Metrics
	Logger     *slog.Logger
}

// Service runs the node's composites.
type Service struct {
	o    Options
	font string

	mu       sync.Mutex
	comps    map[string]*Composite // by ID
	starting map[string]bool       // IDs being started
	closed   bool
}

// NewService returns a service with no composites.
func NewService(o Options) *Service {
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.Font == "" {
		o.Font = DefaultFont
	}
	if o.Max <= 0 {
		o.Max = 4
	}
	if o.Cores <= 0 {
		o.Cores = 0.5 * float64(runtime.NumCPU())
	}
	if o.Members == nil {
		o.Members = func(string) []Member { return nil }
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{o: o, comps: map[string]*Composite{}, starting: map[string]bool{}}
	if _, err := os.Stat(o.Font); err == nil {
		s.font = o.Font
	}
	// Composites do not outlive the node.
	if o.Dir != "" {
		if err := os.RemoveAll(o.Dir); err != nil {
			o.Logger.Warn("composite: remove old directories", "dir", o.Dir, "err", err)
		}
	}
	return s
}

// Start starts a composite of an active session.
func (s *Service) Start(session string, req Request) (Info, error) {
	return s.begin(session, fmt.Sprintf("c_%012x", rand.Uint64()>>16), req)
}

// Resume starts again, with its ID, a composite that ran on another node
// (it died), as Start does; ErrExists if one of that ID runs here.
func (s *Service) Resume(session, id string, req Request) (Info, error) {
	if !validID(id) {
		return Info{}, fmt.Errorf("%w: composite ID %q", ErrInvalid, id)
	}
	return s.begin(session, id, req)
}

// validID tells an ID Start makes (c_ and 12 hex digits): a directory's
// name under Options.Dir.
func validID(id string) bool {
	if len(id) != 14 || !strings.HasPrefix(id, "c_") {
		return false
	}
	for _, r := range id[2:] {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// begin starts composite id of a session.
func (s *Service) begin(session, id string, req Request) (Info, error) {
	if err := req.normalize(); err != nil {
		return Info{}, err
	}
	room := s.o.Rooms(session)
	if room == nil {
		return Info{}, ErrNoSession
	}
	if _, err := exec.LookPath(s.o.FFmpeg); err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrNoFFmpeg, err)
	}
	cells, _ := Cells(req.Layout, req.Width, req.Height)
	if err := s.admit(room, id, len(cells), req.FPS); err != nil {
		return Info{}, err
	}
	defer func() {
		s.mu.Lock()
		delete(s.starting, id)
		s.mu.Unlock()
	}()
	c, err := s.start(session, id, room, req, cells)
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go c.run() // close waits for run to end: it ends at once, stop being closed
		c.close()
		return Info{}, ErrNoSession
	}
	s.comps[c.id] = c
	s.mu.Unlock()
	s.o.Metrics.running.Inc()
	go c.run()
	s.o.Logger.Info("composite started", "composite", c.id, "session", session, "layout", req.Layout,
		"codec", req.Codec, "size", fmt.Sprintf("%dx%d", req.Width, req.Height), "fps", req.FPS, "track", c.outlet.Track.ID())
	return c.info(), nil
}

// admit holds a place for new composite id, or refuses it: one of that
// ID runs or starts (ErrExists), beyond Max, beyond Cores by the running
// ones' measured load, or by the node's governor (its cameras' feeds and
// the picture to every member).
func (s *Service) admit(room *broker.Room, id string, cells, fps int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.comps) + len(s.starting)
	if s.closed {
		return ErrNoSession
	}
	if s.comps[id] != nil || s.starting[id] {
		return fmt.Errorf("%w: %s", ErrExists, id)
	}
	if n >= s.o.Max {
		s.o.Metrics.refused.WithLabelValues("limit").Inc()
		return fmt.Errorf("%w (%d)", ErrLimit, s.o.Max)
	}
	load := 0.0
	for _, c := range s.comps {
		load += float64(c.load.Load()) / 1000
	}
	if k := len(s.comps); k > 0 && load+load/float64(k) > s.o.Cores {
		s.o.Metrics.refused.WithLabelValues("cpu").Inc()
		return fmt.Errorf("%w (%d composites measured at %.2f of %.2f cores)", ErrCapacity, k, load, s.o.Cores)
	}
	if s.o.Admit != nil {
		// About two packets a frame: to the child from each camera, and
		// from the picture to every member of the room.
		pps := float64(2 * fps * (cells + room.Members()))
		if err := s.o.Admit("composite", pps); err != nil {
			s.o.Metrics.refused.WithLabelValues("capacity").Inc()
			return err
		}
	}
	s.starting[id] = true
	return nil
}

func (s *Service) start(session, id string, room *broker.Room, req Request, cells []Rect) (*Composite, error) {
	dir := filepath.Join(s.o.Dir, id)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("composite: %w", err)
	}
	ports, err := ffmpeg.FreePorts(len(cells))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	info := broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000, Source: "composite"}
	if req.Codec == H264 {
		info.Codec, info.Fmtp = "video/H264", "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"
	}
	outlet, err := s.o.Publish(session, "Composite "+req.Layout, info)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Composite{s: s, id: id, session: session, req: req, room: room, cells: cells, dir: dir,
		clock: ffmpeg.NewClock(), ports: ports, outlet: outlet, started: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{}), heard: map[*broker.Track]heard{}}
	c.out, err = ffmpeg.NewOutput(outlet.Track, s.o.Metrics.frames.Inc)
	if err != nil {
		outlet.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// Stop ends a composite of a session: its child, taps and track.
func (s *Service) Stop(session, id string) error {
	s.mu.Lock()
	c := s.comps[id]
	if c == nil || c.session != session {
		s.mu.Unlock()
		return ErrNotFound
	}
	delete(s.comps, id)
	s.mu.Unlock()
	c.close()
	s.o.Metrics.running.Dec()
	s.o.Logger.Info("composite stopped", "composite", id, "session", session)
	return nil
}

// List describes a session's composites, oldest first.
func (s *Service) List(session string) []Info {
	cs := s.of(session)
	out := make([]Info, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.info())
	}
	return out
}

// Get describes a composite of a session.
func (s *Service) Get(session, id string) (Info, bool) {
	s.mu.Lock()
	c := s.comps[id]
	s.mu.Unlock()
	if c == nil || c.session != session {
		return Info{}, false
	}
	return c.info(), true
}

// PID is a composite's ffmpeg child's process ID (0 if none runs): for
// tests and drills that kill it.
func (s *Service) PID(id string) int {
	s.mu.Lock()
	c := s.comps[id]
	s.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.pid()
}

// SetSpeakers tells a session's composites who speaks now (member IDs,
// the loudest first).
func (s *Service) SetSpeakers(session string, members []string) {
	if len(members) == 0 {
		return
	}
	for _, c := range s.of(session) {
		c.mu.Lock()
		c.speakers = slices.Clone(members)
		c.mu.Unlock()
	}
}

// of are a session's composites, oldest first.
func (s *Service) of(session string) []*Composite {
	s.mu.Lock()
	var cs []*Composite
	for _, c := range s.comps {
		if c.session == session {
			cs = append(cs, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return cs[i].started.Before(cs[j].started) })
	return cs
}

// owners are the session members that publish composites: never inputs.
func (s *Service) owners() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]bool, len(s.comps))
	for _, c := range s.comps {
		m[c.outlet.Member] = true
	}
	return m
}

// IDs are the IDs of the composites that run on the node.
func (s *Service) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.comps))
}

// Count is how many composites run.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.comps)
}

// Close stops every composite (the node drains).
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	cs := s.comps
	s.comps = map[string]*Composite{}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
		s.o.Metrics.running.Dec()
	}
}
