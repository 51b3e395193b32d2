package playback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/session"
)

// LinkPlayback is the type of a playback's live links in a session.
const LinkPlayback = "playback"

// Service errors.
var (
	ErrBusy     = errors.New("playback: the node plays as many recordings as it allows")
	ErrNotFound = errors.New("playback: no such playback")
	ErrNoMedia  = errors.New("playback: the recording has no stream to play")
	ErrDraining = errors.New("playback: the node is draining")
)

// Options configure a Service.
type Options struct {
	Sessions *session.Service
	// Chat, if set, lets a playback say its recording's chat lines in the
	// session as its member, "[name] text", at their places (package
	// chat's Agent).
	Chat func(ctx context.Context, sessionID, memberID, name string) (Sayer, error)
	// Max caps the playbacks running at a time on the node (default 4).
	Max    int
	Clock  Clock // default Real
	Logger *slog.Logger
}

// Service plays recordings into live sessions. Lock order: Service.mu is
// never held while calling the session service or a Playback.
type Service struct {
	o      Options
	mu     sync.Mutex
	plays  map[string]*play
	closed bool
	wg     sync.WaitGroup
}

// play is one running playback.
// Sayer says lines in a session's chat as one member, and sets the
// session's shared notes.
type Sayer interface {
	Say(text string) error
	SayNotes(text string) error
	Close()
}

type play struct {
	info  Info
	pb    *Playback
	links []string
	sayer Sayer         // the recording's chat lines go out through it
	gone  chan struct{} // closed when the session closed one of its links
	once  sync.Once
}

// Info describes a playback.
type Info struct {
	ID        string `json:"id"`
	Recording string `json:"recording"`
	Session   string `json:"session"`
	Member    string `json:"member"` // the session member whose tracks it sends
	Name      string `json:"name"`
	// State is "playing", "paused", "ended" (the last packet went out) or
	// "stopped".
	State string `json:"state"`
	Status
}

// NewService returns a service.
func NewService(o Options) *Service {
	if o.Max <= 0 {
		o.Max = 4
	}
	if o.Clock == nil {
		o.Clock = Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o, plays: map[string]*play{}}
}

// Request asks for a recording (its directory, read with export.Open) to
// be played into a session as a member named Name.
type Request struct {
	Recording, Dir string
	Session, Name  string
	Speed          float64 // 0 is 1
}

// Play joins a member to the session and starts sending the recording's
// streams as its tracks (one live link per stream, under its role
// "participant": its floor gates apply). The member leaves when the
// playback ends or stops; the playback stops when the member is removed
// or the session stops.
func (s *Service) Play(ctx context.Context, req Request) (Info, error) {
	if req.Speed == 0 {
		req.Speed = 1
	}
	if req.Speed < MinSpeed || req.Speed > MaxSpeed {
		return Info{}, ErrSpeed
	}
	id := fmt.Sprintf("p_%016x", rand.Uint64())
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return Info{}, ErrDraining
	case len(s.plays) >= s.o.Max:
		s.mu.Unlock()
		return Info{}, fmt.Errorf("%w (%d)", ErrBusy, s.o.Max)
	}
	pl := &play{info: Info{ID: id, Recording: req.Recording, Session: req.Session, Name: req.Name}, gone: make(chan struct{})}
	s.plays[id] = pl // holds the place while it starts
	s.mu.Unlock()
	info, err := s.start(ctx, pl, req)
	if err != nil {
		s.mu.Lock()
		delete(s.plays, id)
		s.mu.Unlock()
	}
	return info, err
}

func (s *Service) start(ctx context.Context, pl *play, req Request) (Info, error) {
	rec, err := export.Open(req.Dir)
	if err != nil {
		return Info{}, err
	}
	p, err := NewPlayer(rec)
	if err != nil {
		return Info{}, err
	}
	if len(p.Tracks) == 0 && len(p.Texts) == 0 {
		p.Close()
		return Info{}, ErrNoMedia
	}
	if err := p.SetSpeed(s.o.Clock.Now(), req.Speed); err != nil {
		p.Close()
		return Info{}, err
	}
	m, err := s.o.Sessions.Join(ctx, req.Session, req.Name, "participant")
	if err != nil {
		p.Close()
		return Info{}, err
	}
	pl.info.Member = m.ID
	if s.o.Chat != nil && len(p.Texts) > 0 {
		if pl.sayer, err = s.o.Chat(ctx, req.Session, m.ID, req.Name); err != nil {
			s.o.Logger.Warn("playback: its chat lines will not be said", "recording", req.Recording, "err", err)
		} else {
			say := pl.sayer
			p.OnText = func(t Text) {
				var err error
				if t.Notes {
					err = say.SayNotes(t.Text)
				} else {
					err = say.Say("[" + t.From + "] " + t.Text)
				}
				if err != nil {
					s.o.Logger.Debug("playback: chat line", "err", err)
				}
			}
		}
	}
	tracks := map[*Track]*broker.Track{}
	for _, t := range p.Tracks {
		t := t
		src := "microphone"
		if t.Kind == media.Video {
			src = "camera"
		}
		l, err := s.o.Sessions.AttachLive(ctx, req.Session, m.ID, session.NewLiveLink{Type: LinkPlayback, Kind: t.Kind, Sends: true, Source: src},
			func(room *broker.Room, at session.Place) (session.Media, error) {
				// The session closes the link when it takes the member away:
				// the playback's watcher then stops it.
				l, bt, err := session.NewNodeTrack(room, at, t.Kind, trackInfo(t, src, m.ID), func() {
					pl.once.Do(func() { close(pl.gone) })
				})
				if err != nil {
					return nil, err
				}
				tracks[t] = bt
				return l, nil
			})
		if err != nil {
			p.Close()
			s.leave(pl)
			return Info{}, err
		}
		pl.links = append(pl.links, l.ID)
	}
	pl.pb = Start(context.Background(), p, s.o.Clock, func(t *Track, b []byte) {
		pk := media.NewPacket()
		pk.SetLen(copy(pk.Buffer(), b))
		tracks[t].Publish(pk)
	})
	s.wg.Add(1)
	go s.watch(pl)
	s.o.Logger.Info("playback started", "playback", pl.info.ID, "recording", req.Recording, "session", req.Session,
		"member", m.ID, "tracks", len(p.Tracks), "speed", req.Speed)
	return s.infoOf(pl), nil
}

// trackInfo describes a played stream for receivers (browsers need the
// codec).
func trackInfo(t *Track, src, member string) broker.TrackInfo {
	ti := broker.TrackInfo{Codec: t.Stream.Codec, ClockRate: t.Stream.Rate, Source: src, Stream: member}
	for _, pt := range t.Stream.Sidecar.PayloadTypes {
		if pt.PT == t.Stream.PT {
			ti.Channels, ti.Fmtp = pt.Channels, pt.Fmtp
		}
	}
	if strings.EqualFold(ti.Codec, "audio/opus") && ti.Channels == 0 {
		ti.Channels = 2 // RFC 7587 §7: always 2 in SDP
	}
	return ti
}

// watch ends a playback: at its end, on Stop, or when the session took
// its member or links away; then its member leaves.
func (s *Service) watch(pl *play) {
	defer s.wg.Done()
	select {
	case <-pl.pb.Done():
	case <-pl.gone:
		pl.pb.Stop()
	}
	s.leave(pl)
	s.mu.Lock()
	delete(s.plays, pl.info.ID)
	s.mu.Unlock()
	st := pl.pb.Status()
	s.o.Logger.Info("playback stopped", "playback", pl.info.ID, "session", pl.info.Session, "ended", st.Ended, "packets", st.Sent)
}

// leave detaches the playback's links and removes its member.
func (s *Service) leave(pl *play) {
	if pl.sayer != nil {
		pl.sayer.Close()
	}
	for _, l := range pl.links {
		s.o.Sessions.DetachLive(pl.info.Session, l)
	}
	if pl.info.Member != "" {
		_ = s.o.Sessions.Leave(context.Background(), pl.info.Session, pl.info.Member)
	}
}

func (s *Service) get(id string) (*play, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl := s.plays[id]
	if pl == nil || pl.pb == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return pl, nil
}

func (s *Service) infoOf(pl *play) Info {
	info := pl.info
	info.Status = pl.pb.Status()
	select {
	case <-pl.pb.Done():
		info.State = "stopped"
		if info.Ended {
			info.State = "ended"
		}
	default:
		info.State = "paused"
		if info.Playing {
			info.State = "playing"
		}
	}
	return info
}

// Get describes a running playback.
func (s *Service) Get(id string) (Info, error) {
	pl, err := s.get(id)
	if err != nil {
		return Info{}, err
	}
	return s.infoOf(pl), nil
}

// Control actions.
const (
	Pause  = "pause"
	Resume = "resume"
	Seek   = "seek"
	Speed  = "speed"
)

// ErrAction is an unknown control action.
var ErrAction = errors.New("playback: action must be pause, resume, seek or speed")

// Control pauses, resumes, seeks (to position) or changes the speed.
func (s *Service) Control(id, action string, position int64, speed float64) (Info, error) {
	pl, err := s.get(id)
	if err != nil {
		return Info{}, err
	}
	switch action {
	case Pause:
		pl.pb.Pause()
	case Resume:
		pl.pb.Resume()
	case Seek:
		err = pl.pb.Seek(time.Duration(position) * time.Millisecond)
	case Speed:
		err = pl.pb.SetSpeed(speed)
	default:
		err = ErrAction
	}
	if err != nil {
		return Info{}, err
	}
	return s.infoOf(pl), nil
}

// Stop stops a playback; its member leaves the session.
func (s *Service) Stop(id string) (Info, error) {
	pl, err := s.get(id)
	if err != nil {
		return Info{}, err
	}
	pl.pb.Stop()
	info := s.infoOf(pl)
	return info, nil
}

// Running is how many playbacks run.
func (s *Service) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.plays)
}

// Close stops every playback (the node drains) and waits for them.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	var pls []*play
	for _, pl := range s.plays {
		if pl.pb != nil {
			pls = append(pls, pl)
		}
	}
	s.mu.Unlock()
	for _, pl := range pls {
		pl.pb.Stop()
	}
	s.wg.Wait()
}
