package sfu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/session"
)

// Sessions is what the SFU needs of the session service.
type Sessions interface {
	AttachLive(ctx context.Context, sessionID, memberID string, req session.NewLiveLink, open session.LiveOpener) (session.Link, error)
	DetachLive(sessionID, linkID string)
	Announce(sessionID string, t event.Type, data any)
}

// Errors of the SFU.
var (
	ErrLimit  = errors.New("sfu: too many peer connections")
	ErrClosed = errors.New("sfu: closed")
)

// SFU holds the node's peer connections.
type SFU struct {
	cfg      Config
	eng      *engine
	sessions Sessions
	log      *slog.Logger
	m        *Metrics

	mu     sync.Mutex
	rooms  map[string]*room // by session ID
	closed bool
	pcs    atomic.Int64 // open peer connections
	// going is set when the node starts to drain (GoingAway): sockets
	// closed from then on say 1001 even if their member's session ends
	// before Close.
	going atomic.Bool

	// workers forward packets to subscribers (SFU.work), peers assigned
	// round robin; done stops them.
	workers    []chan outPkt
	nextWorker atomic.Uint32
	done       chan struct{}
}

// room is the SFU's view of one session: its peers, active speakers and
// quality reports.
type room struct {
	id       string
	peers    map[string]*Peer // by member ID
	speakers *speakers
	stop     context.CancelFunc
	rates    map[*broker.Track]*rate // the tick goroutine's
	quality  map[string]Quality      // the reports the browsers hold, the tick goroutine's
	// qualityWait counts the quality periods since the last report to
	// every browser (the tick goroutine's; see tellQuality).
	qualityWait int
}

// New starts an SFU.
func New(cfg Config, sessions Sessions) (*SFU, error) {
	cfg.defaults()
	eng, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	s := &SFU{cfg: cfg, eng: eng, sessions: sessions, log: cfg.Logger, m: newMetrics(eng.batch), rooms: map[string]*room{}, done: make(chan struct{})}
	for range max(1, runtime.GOMAXPROCS(0)) {
		ch := make(chan outPkt, 64*cfg.Queue)
		s.workers = append(s.workers, ch)
		go s.work(ch)
	}
	return s, nil
}

// Metrics returns the SFU's counters.
func (s *SFU) Metrics() *Metrics { return s.m }

// ICEServers returns the STUN and TURN servers clients are told to use.
func (s *SFU) ICEServers() []ICEServer { return s.cfg.ICEServers }

// UDPPort and TCPPort return the ports of single-port mode and ICE-TCP (0
// when off).
func (s *SFU) UDPPort() int { return s.eng.udpPort() }
func (s *SFU) TCPPort() int { return s.eng.tcpPort() }

// Peers returns the number of open peer connections.
func (s *SFU) Peers() int { return int(s.pcs.Load()) }

// Close hangs up every peer and releases the ports.
func (s *SFU) Close() {
	s.mu.Lock()
	s.closed = true
	var ps []*Peer
	for _, r := range s.rooms {
		for _, p := range r.peers {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.Close()
		<-p.done
	}
	close(s.done)
	s.eng.close()
}

// Closing reports whether Close was called: the node is going away, and a
// member's socket that ends now should say so (1001), so the web app
// rejoins on another node.
func (s *SFU) Closing() bool {
	if s.going.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// GoingAway tells the SFU its node has begun to drain: every member's
// socket it closes from now on ends with 1001, so the web app rejoins on
// another node, though the node's sessions end (and its members leave)
// before Close.
func (s *SFU) GoingAway() { s.going.Store(true) }

// takePC reserves n peer connections under MaxPeers.
func (s *SFU) takePC(n int) error {
	if s.pcs.Add(int64(n)) > int64(s.cfg.MaxPeers) {
		s.pcs.Add(-int64(n))
		s.m.refused.WithLabelValues("max_peers").Inc()
		return fmt.Errorf("%w (webrtc.max_peers %d)", ErrLimit, s.cfg.MaxPeers)
	}
	return nil
}

func (s *SFU) givePC(n int) { s.pcs.Add(-int64(n)) }

// register adds a peer to its room, replacing (and closing) an older peer
// of the same member: a browser that reconnects.
func (s *SFU) register(p *Peer) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	r := s.rooms[p.session]
	if r == nil {
		ctx, cancel := context.WithCancel(context.Background())
		r = &room{id: p.session, peers: map[string]*Peer{}, stop: cancel}
		r.speakers = newSpeakers(p.session, s.sessions, s.log)
		s.rooms[p.session] = r
		go s.tick(ctx, r)
	}
	old := r.peers[p.member]
	r.peers[p.member] = p
	p.room = r
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (s *SFU) unregister(p *Peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[p.session]
	if r == nil || r.peers[p.member] != p {
		return
	}
	delete(r.peers, p.member)
	if len(r.peers) == 0 {
		r.stop()
		delete(s.rooms, p.session)
	}
}

// roomPeers returns a room's peers now.
func (s *SFU) roomPeers(r *room) []*Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := make([]*Peer, 0, len(r.peers))
	for _, p := range r.peers {
		ps = append(ps, p)
	}
	return ps
}
