package thumbnail

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/supervise"
)

// Errors of Get.
var (
	ErrNoTrack  = errors.New("thumbnail: no such video track in the session")
	ErrCapacity = errors.New("thumbnail: the node grabs as many tracks as it may")
	ErrNotYet   = errors.New("thumbnail: no image of the track yet")
	ErrNoFFmpeg = errors.New("thumbnail: ffmpeg is not installed (streaming.ffmpeg)")
)

// Options configure the Service.
type Options struct {
	// Dir holds the grabbers' SDP files.
	Dir string
	// FFmpeg is the ffmpeg binary; "ffmpeg".
	FFmpeg string
	// Interval between images; 3 s.
	Interval time.Duration
	// Width is the largest width of an image; 320 (never scaled up).
	Width int
	// Idle stops a grabber nobody asked for in this long; 60 s.
	Idle time.Duration
	// Max grabbers at once; 16.
	Max int
	// Rooms finds an active session's broker room (nil: not active).
	Rooms      func(session string) *broker.Room
	Supervisor *supervise.Supervisor
	Metrics    *Metrics
	Logger     *slog.Logger
}

// Service runs the node's grabbers, one per video track asked for.
type Service struct {
	o        Options
	mu       sync.Mutex
	grabbers map[key]*Grabber
}

type key struct{ session, track string }

// NewService returns a service with no grabbers.
func NewService(o Options) *Service {
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.Interval <= 0 {
		o.Interval = 3 * time.Second
	}
	if o.Width <= 0 {
		o.Width = 320
	}
	if o.Idle <= 0 {
		o.Idle = time.Minute
	}
	if o.Max <= 0 {
		o.Max = 16
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{o: o, grabbers: map[key]*Grabber{}}
}

// Get returns the newest image of a session's video track (see find)
// and when it
// was taken, starting a grabber for the track if it has none and waiting
// for its first image until ctx ends (then ErrNotYet).
func (s *Service) Get(ctx context.Context, session, track string) ([]byte, time.Time, error) {
	g, err := s.grabber(session, track)
	if err != nil {
		return nil, time.Time{}, err
	}
	g.asked()
	select {
	case <-g.first:
	case <-ctx.Done():
		return nil, time.Time{}, ErrNotYet
	}
	img, at := g.Image()
	return img, at, nil
}

// find is the video track named by id: its own ID, else the ID of its
// publisher in the room (a plain RTP link's track is "<link>/video"),
// else of the session member that owns it (its first camera), so the ID
// fits in one path segment and a member list needs no track IDs.
func find(ts []*broker.Track, id string) *broker.Track {
	for _, match := range []func(*broker.Track) bool{
		func(c *broker.Track) bool { return c.ID() == id },
		func(c *broker.Track) bool { return c.Publisher() == id },
		func(c *broker.Track) bool { return c.Owner() == id },
	} {
		for _, c := range ts {
			if c.Kind() == media.Video && match(c) {
				return c
			}
		}
	}
	return nil
}

func (s *Service) grabber(session, track string) (*Grabber, error) {
	room := s.o.Rooms(session)
	if room == nil {
		return nil, ErrNoTrack
	}
	t := find(room.Tracks(), track)
	if t == nil {
		return nil, ErrNoTrack
	}
	k := key{session, track}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.grabbers[k]; g != nil {
		if broker.SourceOf(g.track) == broker.SourceOf(t) {
			return g, nil // the same camera, maybe by another of its layers
		}
		// Another track by that name now: the old grabber would never be
		// closed once out of the map (remove closes only its own).
		delete(s.grabbers, k)
		s.o.Metrics.grabbers.Dec()
		go g.close()
	}
	if _, err := exec.LookPath(s.o.FFmpeg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoFFmpeg, err)
	}
	if len(s.grabbers) >= s.o.Max {
		s.o.Metrics.refused.Inc()
		return nil, fmt.Errorf("%w (%d)", ErrCapacity, len(s.grabbers))
	}
	g, err := s.start(k, room, t)
	if err != nil {
		return nil, err
	}
	s.grabbers[k] = g
	s.o.Metrics.grabbers.Inc()
	return g, nil
}

// PID is the process ID of a track's ffmpeg child (0 if none runs).
func (s *Service) PID(session, track string) int {
	s.mu.Lock()
	g := s.grabbers[key{session, track}]
	s.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.proc.PID()
}

func (s *Service) remove(g *Grabber) {
	s.mu.Lock()
	mine := s.grabbers[g.k] == g
	if mine {
		delete(s.grabbers, g.k)
	}
	s.mu.Unlock()
	if mine {
		g.close()
		s.o.Metrics.grabbers.Dec()
	}
}

// Close stops every grabber.
func (s *Service) Close() {
	s.mu.Lock()
	gs := s.grabbers
	s.grabbers = map[key]*Grabber{}
	s.mu.Unlock()
	for _, g := range gs {
		g.close()
		s.o.Metrics.grabbers.Dec()
	}
}

// Grabber takes images of one track.
type Grabber struct {
	s       *Service
	k       key
	room    *broker.Room
	track   *broker.Track // the track asked for
	cur     *broker.Track // the one tapped: of a simulcast camera, the layer Best names; run's
	sdp     string
	feed    *ffmpeg.Feed
	untap   func()
	proc    *ffmpeg.Proc
	unwatch func()
	first   chan struct{} // closed at the first image
	stop    chan struct{}
	done    chan struct{}

	mu        sync.Mutex
	img       []byte
	at        time.Time
	lastAsked time.Time
}

func (s *Service) start(k key, room *broker.Room, t *broker.Track) (*Grabber, error) {
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.o.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	g := &Grabber{s: s, k: k, room: room, track: t, sdp: filepath.Join(s.o.Dir, k.session+"-"+k.track+".sdp"),
		first: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), lastAsked: time.Now()}
	st := ffmpeg.VideoStream(t, ports[0])
	if g.feed, err = ffmpeg.NewFeed(st, ffmpeg.NewClock()); err != nil {
		return nil, err
	}
	if err := os.WriteFile(g.sdp, []byte(ffmpeg.SDP(st)), 0o640); err != nil {
		g.feed.Close()
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	g.cur = room.Best(t)
	g.untap = room.Tap(g.cur, "thumbnail:"+k.track, g.feed)
	g.proc = ffmpeg.Start(ffmpeg.ProcOptions{Name: "thumbnail " + k.session + "/" + k.track, Path: s.o.FFmpeg,
		Args: g.args, Stdout: g.read, OnStart: g.feed.Restarted, Rekey: g.feed.AskKeyframe, Logger: s.o.Logger})
	if s.o.Supervisor != nil {
		g.unwatch = s.o.Supervisor.Add("thumbnail", "thumbnail:"+k.session+"/"+k.track, g.status, g.proc.Kill)
	}
	go g.run()
	return g, nil
}

func (g *Grabber) args() []string {
	o := g.s.o
	// "error": mjpeg's range conversion warns on every frame.
	a := append([]string{"-hide_banner", "-nostdin", "-loglevel", "error"}, ffmpeg.ProgressArgs...)
	return append(a, "-protocol_whitelist", "file,udp,rtp", "-reorder_queue_size", "64", "-analyzeduration", "2000000",
		"-i", g.sdp, "-an",
		"-vf", "fps=1/"+strconv.FormatFloat(o.Interval.Seconds(), 'f', -1, 64)+
			",scale='min("+strconv.Itoa(o.Width)+",iw)':-2",
		"-c:v", "mjpeg", "-q:v", "5", "-f", "image2pipe", "pipe:1")
}

// read takes the child's JPEGs off its standard output.
func (g *Grabber) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		img, err := nextJPEG(br)
		if errors.Is(err, errBadJPEG) {
			g.s.o.Metrics.bad.Inc()
			continue
		}
		if err != nil {
			return
		}
		g.mu.Lock()
		g.img, g.at = img, time.Now()
		g.mu.Unlock()
		g.s.o.Metrics.images.Inc()
		select {
		case <-g.first:
		default:
			close(g.first)
		}
	}
}

// errBadJPEG is a child's output that is not the JPEG it should be: the
// reader skips to the next SOI.
var errBadJPEG = errors.New("thumbnail: not a baseline JPEG")

// maxImage bounds one image.
const maxImage = 8 << 20

// nextJPEG reads one JPEG (ITU T.81 §B.1): SOI, marker segments with
// their lengths, and after SOS entropy-coded data in which an FF byte is
// followed by 00 (a stuffed FF) or a restart marker, up to EOI. Bytes
// before an SOI are skipped.
//
//	FF D8 | FF xx len(2) data(len-2) … | FF DA len(2) header | entropy data … | FF D9
func nextJPEG(br *bufio.Reader) ([]byte, error) {
	var img []byte
	// Find SOI.
	for prev := byte(0); ; {
		c, err := br.ReadByte()
		if err != nil {
			return nil, err
		}
		if prev == 0xff && c == 0xd8 {
			img = append(img, 0xff, 0xd8)
			break
		}
		prev = c
	}
	for len(img) < maxImage {
		c, err := br.ReadByte()
		if err != nil {
			return nil, err
		}
		if c != 0xff {
			return nil, errBadJPEG
		}
		m, err := br.ReadByte()
		for err == nil && m == 0xff { // fill bytes
			m, err = br.ReadByte()
		}
		if err != nil {
			return nil, err
		}
		img = append(img, 0xff, m)
		switch {
		case m == 0xd9:
			return img, nil
		case m == 0x01 || (m >= 0xd0 && m <= 0xd7):
			continue // no length
		}
		var l [2]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			return nil, err
		}
		n := int(l[0])<<8 | int(l[1])
		if n < 2 {
			return nil, errBadJPEG
		}
		img = append(img, l[:]...)
		seg := make([]byte, n-2)
		if _, err := io.ReadFull(br, seg); err != nil {
			return nil, err
		}
		img = append(img, seg...)
		if m != 0xda {
			continue
		}
		// Entropy-coded data up to the next marker that is not a stuffed
		// FF or a restart marker.
		for len(img) < maxImage {
			c, err := br.ReadByte()
			if err != nil {
				return nil, err
			}
			if c != 0xff {
				img = append(img, c)
				continue
			}
			d, err := br.ReadByte()
			if err != nil {
				return nil, err
			}
			if d == 0x00 || (d >= 0xd0 && d <= 0xd7) {
				img = append(img, c, d)
				continue
			}
			if d == 0xd9 {
				return append(img, 0xff, 0xd9), nil
			}
			return nil, errBadJPEG // baseline JPEG: one scan, then EOI
		}
	}
	return nil, errBadJPEG
}

// Image is the newest image and when it was taken (nil before the first).
func (g *Grabber) Image() ([]byte, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.img, g.at
}

func (g *Grabber) asked() {
	g.mu.Lock()
	g.lastAsked = time.Now()
	g.mu.Unlock()
}

func (g *Grabber) status() supervise.Status {
	return supervise.Status{Kind: "thumbnail", ID: "thumbnail:" + g.k.session + "/" + g.k.track, Session: g.k.session,
		Beats: g.proc.Beats(), Inputs: 1, Outputs: 1}
}

// run stops the grabber when nobody asked for it in Idle or its track
// (of a simulcast camera, all its layers) left the room. Every second it
// taps the layer Best names if that changed (the feed waits for its
// keyframe and asks for it), and has the feed ask for keyframes again
// while the child has made no image (Proc.CheckKeyframes).
func (g *Grabber) run() {
	defer close(g.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.mu.Lock()
			idle := time.Since(g.lastAsked) > g.s.o.Idle
			g.mu.Unlock()
			gone := g.s.o.Rooms(g.k.session) != g.room
			if !gone {
				gone = true
				src := broker.SourceOf(g.track)
				for _, c := range g.room.Tracks() {
					if broker.SourceOf(c) == src {
						gone = false
					}
				}
			}
			if idle || gone {
				go g.s.remove(g)
				return
			}
			if b := g.room.Best(g.track); b != g.cur {
				g.untap()
				g.cur = b
				g.untap = g.room.Tap(b, "thumbnail:"+g.k.track, g.feed)
			}
			g.proc.CheckKeyframes(now)
		}
	}
}

func (g *Grabber) close() {
	close(g.stop)
	<-g.done
	if g.unwatch != nil {
		g.unwatch()
	}
	g.untap()
	g.proc.Stop()
	g.feed.Close()
	_ = os.Remove(g.sdp)
}
