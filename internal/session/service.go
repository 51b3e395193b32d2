package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/rtplink"
)

// Publisher announces session events; *bus.Bus is one.
type Publisher interface {
	SessionEvent(sessionID string, typ event.Type, data any) error
}

// Options configure a Service.
type Options struct {
	Catalog *catalog.Store
	Broker  *broker.Broker
	Events  Publisher
	Sockets rtplink.Sockets
	// LinkMetrics, if set, take the plain RTP links' receiver reports.
	LinkMetrics *rtplink.Metrics
	// Queue bounds the packets in flight to each endpoint.
	Queue int
	// MaxSessions caps the sessions not over (scheduled or live) and
	// MaxMembers the members of one session; 0 means no cap.
	MaxSessions, MaxMembers int
	// OnDigit, if set, hears the digits (RFC 4733) a member's mixed link
	// sends, when its mix names a telephone-event type; it runs on the
	// media goroutine and must not block.
	OnDigit func(session, member string, digit byte)
	// Mixers mix audio for the links that ask for a mix; nil refuses them.
	Mixers *mixer.Service
	// Video, if set, transcodes the cameras a receiving video link that
	// names its codec cannot take; without it such a link gets them as
	// they are.
	Video VideoTranscoder
	// Links is the policy for links members create, and the caps.
	Links LinkPolicy
	// Admission, if set, refuses new links and joins past the node's
	// capacity (admit.go).
	Admission Admission
	// Node is this node's ID in a cluster: with it, sessions have one owner
	// node at a time by a lease in the catalog (owner.go), renewed every
	// LeaseRenew (default 2 s) and expiring LeaseTTL (default 6 s) after the
	// last renewal. "" owns every session, as a lone node.
	Node                 string
	LeaseTTL, LeaseRenew time.Duration
	// OnTakeOver, if set, is told (never under the service's lock) each
	// time this node took a session over whose lease had expired, with the
	// node that held it: the node restarts the session's media services
	// that ran there (node/failover.go).
	OnTakeOver func(sessionID, from string)
	// OnRound, if set, runs after every lease round (RunLeases), outside
	// the service's lock.
	OnRound func(ctx context.Context)
	// OnCreated, if set, is told (on a goroutine of its own) of each
	// session this node created: the node may hand it to a node with
	// more room (HandOff, node/place.go).
	OnCreated func(sessionID string)
	Logger    *slog.Logger
	Now       func() time.Time
}

// Service is the session service of one node.
type Service struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex // serializes mutations; guards live, ctl, timers, retired and draining
	live     map[string]*liveSession
	ctl      map[string]*control      // sessions not over: members, subgroups, floors
	timers   map[string][]*time.Timer // the scheduler's start and end timers
	retired  LinkStats                // counters of closed links, so node totals never go down
	draining bool
	openers  map[string]opener

	refusedLinks atomic.Uint64 // by the destination policy or a cap

	leaseMu    sync.Mutex               // guards owned; after mu
	owned      map[string]catalog.Lease // the sessions this node owns (Options.Node)
	lostLeases atomic.Uint64
}

// RefusedLinks counts the links refused by the destination policy or a cap
// (convene_links_refused_total).
func (s *Service) RefusedLinks() uint64 { return s.refusedLinks.Load() }

type liveSession struct {
	room  *broker.Room
	links map[string]*liveLink
	rates map[*broker.Track]*trackRate // admissions' measure of the tracks (admit.go)
}

type liveLink struct {
	rec     catalog.Link
	media   Media
	member  string // "" for a link not tied to a member
	policed bool   // created by a member (LinkPolicy)
	live    bool   // AttachLive: not in the catalog
	source  string // a live link's source (camera, microphone, screen)
}

// Media is what the session needs of every kind of link — rtp and
// multicast now; WebRTC, mixer and recorder links plug in the same way:
// the session member it belongs to ("" for none), the broker track it
// publishes (nil if it only receives), which the session puts behind that
// member's floor gate, and its counters. It receives through the
// broker.Sink it joined the room with, in the member's subgroup, and never
// hears its own member's other links (broker.Member.Owner). The session
// treats every Media alike; only its opener knows its type.
type Media interface {
	Member() string
	Track() *broker.Track
	Local() Local
	Stats() LinkStats
	Close()
}

// New returns a service. Call Restore to bring back the sessions that were
// active when the node stopped.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Queue <= 0 {
		o.Queue = 512
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseRenew <= 0 {
		o.LeaseRenew = DefaultLeaseRenew
	}
	return &Service{o: o, log: o.Logger, live: map[string]*liveSession{}, ctl: map[string]*control{},
		timers: map[string][]*time.Timer{}, openers: openers(), owned: map[string]catalog.Lease{}}
}

func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

func (s *Service) publish(sessionID string, typ event.Type, data any) {
	if s.o.Events == nil {
		return
	}
	if err := s.o.Events.SessionEvent(sessionID, typ, data); err != nil {
		s.log.Warn("publish session event", "session", sessionID, "event", typ, "err", err)
	}
}

func wrapCatalog(err error) error {
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, catalog.ErrExists):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// Get returns a session with its links, tracks and counters.
func (s *Service) Get(ctx context.Context, id string) (Session, error) {
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return Session{}, wrapCatalog(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view(rec)
	if s.o.Node != "" && !Final(rec.State) {
		if l, err := s.o.Catalog.Owner(ctx, id); err == nil {
			v.Owner, v.OwnerEpoch = l.Node, l.Epoch
		}
	}
	return v, nil
}

// List returns every session in the catalog.
func (s *Service) List(ctx context.Context) ([]Session, error) {
	recs, err := s.o.Catalog.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, len(recs))
	for i, r := range recs {
		out[i] = s.view(r)
	}
	return out, nil
}

// view is called with mu held.
func (s *Service) view(rec catalog.Session) Session {
	out := Session{ID: rec.ID, Name: rec.Name, State: rec.State, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		Links: []Link{}, Tracks: []Track{}}
	if !rec.StartAt.IsZero() {
		out.StartAt = &rec.StartAt
	}
	if !rec.EndAt.IsZero() {
		out.EndAt = &rec.EndAt
	}
	if c := s.ctl[rec.ID]; c != nil {
		out.Members = len(c.members)
		out.Floors = c.floors.States()
	}
	ls := s.live[rec.ID]
	if ls == nil {
		return out
	}
	for _, l := range sortedLinks(ls.links) {
		out.Links = append(out.Links, linkView(l))
	}
	for _, t := range ls.room.Tracks() {
		n, b := t.Stats()
		out.Tracks = append(out.Tracks, Track{ID: t.ID(), Kind: t.Kind().String(), Publisher: t.Publisher(),
			Subscribers: t.Subscribers(), Packets: n, Bytes: b, Gated: t.Gated(), FloorDropped: t.GateDrops()})
	}
	return out
}

// closeLink stops a link's media and keeps its counters; mu is held.
func (s *Service) closeLink(l *liveLink) {
	l.media.Close()
	st := mediaStats(l.media)
	s.retired.PacketsIn += st.PacketsIn
	s.retired.BytesIn += st.BytesIn
	s.retired.PacketsOut += st.PacketsOut
	s.retired.BytesOut += st.BytesOut
	if s.retired.Dropped == nil {
		s.retired.Dropped = map[string]uint64{}
	}
	for k, v := range st.Dropped {
		s.retired.Dropped[k] += v
	}
}

func linkView(l *liveLink) Link {
	r := l.rec
	return Link{ID: r.ID, Member: l.member, Type: r.Type, Kind: r.Kind, Direction: r.Direction, Remote: r.Remote,
		RemoteRTCP: r.RemoteRTCP, RTCPMux: r.RTCPMux, TTL: r.TTL, Interface: r.Interface, Mix: r.Mix, Codec: r.Codec,
		Local: l.media.Local(), CreatedAt: r.CreatedAt, Stats: mediaStats(l.media), Source: l.source}
}
