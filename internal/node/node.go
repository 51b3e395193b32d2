package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/api"
	"github.com/convene/convene/internal/bridge"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/hls"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/peerdelay"
	"github.com/convene/convene/internal/playback"
	"github.com/convene/convene/internal/recording"
	"github.com/convene/convene/internal/registry"
	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/relay/ng"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/sfu"
	"github.com/convene/convene/internal/sip"
	"github.com/convene/convene/internal/sipusers"
	"github.com/convene/convene/internal/supervise"
	"github.com/convene/convene/internal/thumbnail"
	"github.com/convene/convene/internal/transcode"
	"github.com/convene/convene/internal/udpmux"
	"github.com/convene/convene/internal/vtranscode"
	"github.com/convene/convene/internal/webui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Node is one running Convene node.
type Node struct {
	cfg     config.Config
	log     *slog.Logger
	version string
	// stalls writes execution traces of media stalls (log.stall_trace).
	stalls *stallTracer

	cat      *catalog.Store
	bus      *bus.Bus
	registry *registry.Registry // the cluster's nodes, from their heartbeats
	// peers measures the delay to the other nodes; pingStop ends the
	// answers to their probes (peers.go).
	peers    *peerdelay.Pinger
	pingStop func()
	// bridge spans the sessions' rooms across the cluster's nodes;
	// bridgeConns are its audio and video connections.
	bridge       *bridge.Bridge
	bridgeConns  []*bridgeConn
	sessionWatch *nats.Subscription // other nodes' session events (watchSessions)
	socks        rtplink.Sockets
	sessions     *session.Service
	mixers       *mixer.Service
	super        *supervise.Supervisor
	// transcode gives browsers phones' G.711 as Opus.
	transcode *transcode.Hub
	// vtranscode gives receivers cameras of a codec they cannot take.
	vtranscode *vtranscode.Hub
	dtmf       *dtmf
	events     *events.Hub
	apiKey     string // the API key, when the node made it (printed at start)
	// tokenKey identifies the key the node's tokens are signed with
	// (auth.Signer.KeyID); set before anything is admitted.
	tokenKey string
	relay    *relay.Relay
	relayNG  *ng.Server
	sipUsers *sipusers.Service
	sip      *sip.Server
	rtc      *sfu.SFU
	// chat carries the sessions' conversations.
	chat *chat.Service
	// recordings record sessions; set before any session event can fire.
	recordings *recording.Service
	// playbacks play recordings into sessions.
	playbacks *playback.Service
	// hls streams sessions to passive viewers; thumbnails grabs images.
	hls        *hls.Service
	thumbnails *thumbnail.Service
	// composites make one video of several cameras.
	composites *composite.Service
	// phones are the composites of video phones, or the speaker they follow.
	phones *phoneComposites
	// pins are the members of the HLS streams' own composites.
	pins pinMembers
	// kept keeps the HLS streams and composites started through the API
	// in the catalog, so they outlive the node (a cluster only; services.go).
	kept *keeper
	// failover restarts what dead nodes ran of the sessions this node
	// owns (a cluster only; failover.go).
	failover *failover
	ln       net.Listener
	http     *http.Server
	// gov measures capacity and load, admits and sheds (capacity.go).
	gov     *capacity.Governor
	govStop func()

	hbCancel context.CancelFunc
	hbDone   chan struct{}
	served   chan error

	stopOnce sync.Once
	stopErr  error
}

// busToken turns a node ID (often a hostname with dots) into a NATS subject
// token.
func busToken(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' {
			return '-'
		}
		return r
	}, id)
}

// leaseHolder is the node's ID for session ownership (session.Options.Node)
// when its catalog is shared (PostgreSQL: a cluster); "" on SQLite, where
// the node is alone and owns every session it has, as before leases: a
// lone node whose node_id changes (a new hostname) still restores them all.
func leaseHolder(cfg config.Config) string {
	if cfg.Catalog.Driver == config.DriverPostgres {
		return cfg.NodeID
	}
	return ""
}

// Start opens everything a node needs and starts serving. cfg must be
// validated; Start resolves its derived defaults.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger, version string) (n *Node, err error) {
	cfg = cfg.Resolved()
	n = &Node{cfg: cfg, log: log, version: version, served: make(chan error, 1)}
	opened := n // `return nil, err` sets n to nil before this defer runs
	defer func() {
		if err != nil {
			opened.closeAll()
		}
	}()

	if n.stalls, err = startStallTrace(cfg.Log.StallTrace, log); err != nil {
		return nil, err
	}
	if n.cat, err = catalog.Open(ctx, cfg.Catalog.Driver, cfg.Catalog.DSN); err != nil {
		return nil, err
	}
	if n.bus, err = bus.Connect(ctx, bus.Options{URL: cfg.NATS.URL, Listen: cfg.NATS.Listen, NodeID: busToken(cfg.NodeID),
		Logger: log, Version: version}); err != nil {
		return nil, err
	}
	if n.registry, err = registry.New(registry.Options{Watcher: n.bus, Logger: log}); err != nil {
		return nil, err
	}
	if n.peers, n.pingStop, err = startPeerDelay(n.bus, n.registry, cfg.HeartbeatInterval.Std()); err != nil {
		return nil, err
	}
	rooms := broker.New()
	if n.socks, err = openSockets(cfg.RTP.Addr, cfg.RTP.Port, udpmux.Options{Batch: cfg.RTP.Batch, Writers: cfg.RTP.Writers, Logger: log}); err != nil {
		return nil, err
	}
	// A bridged message's packets go out to plain RTP endpoints through
	// the RTP socket's writers: they wake once a message.
	if n.bridge, n.bridgeConns, err = startBridge(n.bus, n.cfg.NATS.MediaBatch.Std(), n.socks.RTP, log); err != nil {
		return nil, err
	}
	rooms.Watch(n.bridge.Open, n.bridge.Close)
	n.gov = n.newGovernor()
	n.events = events.New(events.Options{Bus: n.bus, Logger: log})
	acc, fresh, err := access(cfg)
	if err != nil {
		return nil, err
	}
	n.apiKey, n.tokenKey = fresh, acc.Tokens.KeyID()
	allow, err := cfg.Links.AllowedDestinations()
	if err != nil {
		return nil, err
	}
	mixMetrics, supMetrics := mixer.NewMetrics(), supervise.NewMetrics()
	if n.super, err = supervise.New(supervise.Options{Bus: n.bus, Metrics: supMetrics, Logger: log}); err != nil {
		return nil, err
	}
	n.mixers = mixer.NewService(mixer.Options{Speakers: cfg.Mixer.Speakers, Depth: cfg.Mixer.Depth, Max: cfg.Mixer.Max,
		Cores: cfg.Mixer.Cores, Supervisor: n.super, Metrics: mixMetrics, Logger: log,
		OnSpeakers: func(sessionID, group string, members []string) {
			n.sessions.Announce(sessionID, event.MixerSpeakers, map[string]any{"group": group, "members": members})
		}})
	vtMetrics := vtranscode.NewMetrics()
	n.vtranscode = startVTranscode(cfg, n.gov, n.super, vtMetrics, log)
	var video session.VideoTranscoder
	if n.vtranscode != nil {
		video = linkTranscoder{n.vtranscode}
	}
	linkMetrics := rtplink.NewMetrics()
	n.sessions = session.New(session.Options{Video: video, Catalog: n.cat, Broker: rooms, Events: recordingEvents{Publisher: floorTones{Publisher: n.events, mixers: n.mixers}, n: n}, Sockets: n.socks, Mixers: n.mixers,
		LinkMetrics: linkMetrics,
		OnDigit:     func(sessionID, member string, d byte) { n.dtmf.digit(sessionID, member, d) },
		Node:        leaseHolder(cfg),
		OnTakeOver: func(sessionID, from string) {
			if f := n.failover; f != nil {
				f.session(context.Background(), sessionID, from)
			}
		},
		OnRound: func(ctx context.Context) {
			if f := n.failover; f != nil {
				f.round(ctx)
			}
		},
		OnCreated: func(sessionID string) {
			if n.failover != nil { // a cluster
				n.placeSession(sessionID)
			}
		},
		Queue: cfg.RTP.Queue, MaxSessions: cfg.Sessions.Max, MaxMembers: cfg.Sessions.MaxMembers, Logger: log, Admission: n.gov,
		Links: session.LinkPolicy{Allow: allow, Own: n.ownAddrs,
			MaxPerMember: cfg.Links.MaxPerMember, MaxPerSession: cfg.Links.MaxPerSession, Consent: cfg.Links.Consent.Std(),
			LatchWindow: cfg.Relay.LatchWindow.Std()}})
	n.dtmf = newDTMF(n.sessions, log)
	reg := prometheus.NewRegistry()
	vtMetrics.Register(reg)
	linkMetrics.Register(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newMediaCollector(n.sessions, n.socks), n.registry.Collector(), n.peers.Collector(), capacity.NewCollector(n.gov), newClusterCollector(n.bridge, n.sessions))
	if n.recordings, err = startRecordings(ctx, cfg, n.cat, n.sessions, n.events, reg, log); err != nil {
		return nil, fmt.Errorf("recordings: %w", err)
	}
	if leaseHolder(cfg) != "" {
		n.failover = &failover{self: leaseHolder(cfg), cat: n.cat, sessions: n.sessions, recordings: n.recordings,
			registry: n.registry, log: log.With("component", "failover")}
	}
	n.chat = chat.New(chat.Options{Catalog: n.cat, Relay: chatRelay{n.bus}, Floors: chatFloors{n.sessions}, Notes: chatNotes{n},
		Logger: log.With("component", "chat")}, reg)
	n.playbacks = playback.NewService(playback.Options{Sessions: n.sessions, Max: cfg.Recording.Playbacks,
		Chat: func(ctx context.Context, sessionID, memberID, name string) (playback.Sayer, error) {
			return n.chat.AttachAgent(ctx, sessionID, memberID, name, func(string, string) {})
		}, Logger: log.With("component", "playback")})
	if n.sessionWatch, err = watchSessions(n.bus, n.sessions, n.events); err != nil {
		return nil, err
	}
	n.composites = startComposites(cfg, n.sessions, n.gov, n.super, reg, log)
	n.hls, n.thumbnails = startStreaming(cfg, n.sessions, n.mixers, n.composites, &n.pins, n.super, n.events, reg, log)
	if n.failover != nil {
		n.kept = &keeper{self: n.failover.self, cat: n.cat, sessions: n.sessions, hls: n.hls, composites: n.composites,
			pins: &n.pins, url: n.publicURL, urlOf: n.nodeURL, log: log.With("component", "failover"),
			mine: map[serviceKey]bool{}, elsewhere: map[string]streamAt{}}
		if err := n.kept.orphan(ctx); err != nil {
			return nil, err
		}
		n.failover.kept = n.kept
	}
	if err = n.sessions.Restore(ctx); err != nil {
		return nil, fmt.Errorf("restore sessions: %w", err)
	}

	mixMetrics.Register(reg)
	supMetrics.Register(reg)
	if n.relay, n.relayNG, err = startRelay(cfg.Relay, reg, log); err != nil {
		return nil, err
	}
	n.phones = newPhoneComposites(n.composites, n.sessions.Room)
	confs := conferences{sessions: n.sessions, dtmf: n.dtmf, media: n.socks.RTP.LocalAddr(), chat: n.chat, phones: n.phones}
	if f := n.failover; f != nil { // a cluster: calls are kept for another node to take over
		confs.mixRoom = func() []string { // a phone this node cannot mix for goes where a mixer is free
			var to []string
			for _, o := range n.registry.WithMixerRoom(busToken(cfg.NodeID)) {
				to = append(to, o.Heartbeat.SIP)
			}
			return to
		}
		confs.calls = &phoneCalls{self: f.self, cat: n.cat, log: log.With("component", "failover")}
		confs.calls.confs = confs
		f.calls = confs.calls
	}
	if n.sipUsers, n.sip, err = startSIP(ctx, cfg.SIP, n.cat, n.relay, confs, reg, log); err != nil {
		return nil, err
	}
	if confs.calls != nil {
		confs.calls.srv = n.sip
	}
	tcMetrics := transcode.NewMetrics()
	tcMetrics.Register(reg)
	n.transcode = transcode.NewHub(transcode.Options{Supervisor: n.super, Metrics: tcMetrics, Logger: log})
	// A member rejoins on another node with room if this one goes.
	rejoin := func() []capacity.Alternative { return n.alternatives(0) }
	if n.rtc, err = startRTC(cfg, n.sessions, n.gov, n.transcode, n.vtranscode, n.chat, rejoin, n.place, reg, log); err != nil {
		return nil, err
	}
	handler := api.New(api.Options{
		RTC:      n.rtc,
		UI:       webui.HandlerWith(n.peerOrigins),
		Sessions: n.sessions,
		Node: api.NodeInfo{ID: cfg.NodeID, Version: version, NATSURL: n.bus.ClientURL(), Embedded: n.bus.Embedded(),
			RTPAddr: n.socks.RTP.LocalAddr().String(), RTCPAddr: n.socks.RTCP.LocalAddr().String()},
		Health: func() error {
			if !n.bus.Conn().IsConnected() {
				return errors.New("not connected to NATS")
			}
			return n.cat.Ping(context.Background())
		},
		Capacity: n.gov.Status,
		VTranscoders: func() []vtranscode.Info {
			if n.vtranscode == nil {
				return nil
			}
			return n.vtranscode.List()
		},
		Registry:   reg,
		Logger:     log,
		Pprof:      cfg.HTTP.Pprof,
		Access:     acc,
		Events:     n.events,
		Users:      n.sipUsers,
		Dialler:    n.sip,
		Recordings: n.recordings,
		RecordElsewhere: func(ctx context.Context, req recording.NewRecording) (recording.Recording, bool) {
			return n.recordElsewhere(ctx, req)
		},
		StopElsewhere: n.stopElsewhere,
		Playbacks:     n.playbacks,
		HLS:           n.hls,
		Thumbnails:    n.thumbnails,
		Composites:    n.composites,
		Kept:          n.apiKept(),
		HLSElsewhere: func(session string) string {
			if n.kept == nil {
				return ""
			}
			return n.kept.streamURL(session)
		},
		Nodes:      n.registry,
		Chat:       n.chat,
		MaxExports: cfg.Recording.Exports,

		MetricsToken:    cfg.HTTP.MetricsToken,
		RequestTimeout:  cfg.HTTP.RequestTimeout.Std(),
		WSMaxPerSession: cfg.HTTP.WSMaxPerSession,
		WSMax:           cfg.HTTP.WSMax,
		WSPing:          cfg.HTTP.WSPing.Std(),
	})
	if n.ln, err = net.Listen("tcp", cfg.HTTP.Addr); err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	n.http = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: cfg.HTTP.IdleTimeout.Std(), MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { n.served <- n.http.Serve(n.ln) }()
	n.bus.SetPublic(n.public(n.tokenKey))

	n.runGovernor()
	if n.failover != nil { // a cluster: sessions handed to this node (placeSession)
		if _, err := n.adoptPlaced(); err != nil {
			return nil, fmt.Errorf("nats: %w", err)
		}
		if _, err := n.takeRecordings(); err != nil { // recordings placed here (recplace.go)
			return nil, fmt.Errorf("nats: %w", err)
		}
	}
	hbCtx, cancel := context.WithCancel(context.Background())
	n.hbCancel, n.hbDone = cancel, make(chan struct{})
	go func() {
		defer close(n.hbDone)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); n.sessions.RunLeases(hbCtx) }()
		wg.Add(1)
		go func() { defer wg.Done(); n.peers.Run(hbCtx) }()
		n.bus.RunHeartbeat(hbCtx, cfg.HeartbeatInterval.Std(), n.load)
		wg.Wait()
	}()
	log.Info("node started", "node", cfg.NodeID, "url", n.URL(), "rtp", n.socks.RTP.LocalAddr().String(),
		"rtcp", n.socks.RTCP.LocalAddr().String(), "nats", natsDesc(n.bus), "catalog", cfg.Catalog.Driver, "data_dir", cfg.DataDir)
	return n, nil
}

func natsDesc(b *bus.Bus) string {
	if b.Embedded() && b.ClientURL() == "" {
		return "embedded (in-process)"
	}
	if b.Embedded() {
		return "embedded at " + b.ClientURL()
	}
	return b.ClientURL()
}

// apiKept is what the API tells of the services it starts and stops:
// the keeper in a cluster, else nobody.
func (n *Node) apiKept() api.Kept {
	if n.kept == nil {
		return nil
	}
	return n.kept
}

// publicURL is where clients reach the node, as its heartbeats say ("" if
// it does not know); set once the HTTP listener is.
func (n *Node) publicURL() string {
	if n.ln == nil {
		return ""
	}
	return n.public(n.tokenKey).URL
}

// nodeURL is where clients reach another node of the cluster, as its
// heartbeats say; "" if it does not say or is taken for dead.
func (n *Node) nodeURL(node string) string {
	if n.registry.Gone(busToken(node)) {
		return ""
	}
	for _, o := range n.registry.Nodes() {
		if o.ID == busToken(node) {
			return o.Heartbeat.URL
		}
	}
	return ""
}

// URL returns the node's HTTP address as a URL.
func (n *Node) URL() string { return "http://" + n.ln.Addr().String() }

// RTPAddr returns the shared RTP socket's address.
func (n *Node) RTPAddr() string { return n.socks.RTP.LocalAddr().String() }

// Bus returns the node's NATS connection holder.
func (n *Node) Bus() *bus.Bus { return n.bus }

// GeneratedAPIKey returns the operator API key when the node has just made
// it (no auth.api_keys configured, first start), for the operator to see
// once; "" otherwise: only its digest is kept.
func (n *Node) GeneratedAPIKey() string { return n.apiKey }

// Served is closed with the HTTP server's error if it stops on its own.
func (n *Node) Served() <-chan error { return n.served }

func (n *Node) load() bus.Load {
	ld := n.sessions.Load()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var drops uint64
	for _, v := range ld.Dropped {
		drops += v
	}
	cp := n.gov.Status()
	var recFree float64
	if n.recordings != nil {
		recFree = n.recordings.Free()
	}
	var mixFree int
	if n.mixers != nil {
		mixFree = n.mixers.Free()
	}
	return bus.Load{RecordingFreeBps: recFree, MixersFree: mixFree, Sessions: ld.Sessions, Links: ld.Links, Tracks: ld.Tracks, PacketsIn: ld.PacketsIn,
		PacketsOut: ld.PacketsOut, Drops: drops, Goroutines: runtime.NumGoroutine(), HeapBytes: ms.HeapAlloc,
		CPUSeconds: bus.ProcessCPUSeconds(), CapacityPPS: cp.CapacityPPS, LoadPPS: cp.LoadPPS, ShedLevel: cp.ShedLevel,
		AdmitPPS: cp.AdmitPPS, CommittedPPS: cp.CommittedPPS, Peers: n.peers.Peers(), RTPLinks: linkSummary(ld.Quality, time.Now())}
}

// Drain stops the node gracefully: no new requests, every session's media
// stopped with queued packets sent, NATS told, catalog flushed. If ctx ends
// first, what remains is closed at once.
func (n *Node) Drain(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.log.Info("node draining", "node", n.cfg.NodeID)
		if n.rtc != nil {
			n.rtc.GoingAway() // the sessions' draining below hangs members up: 1001
		}
		if err := n.bus.NodeEvent(bus.EventDraining, nil); err != nil {
			n.log.Warn("publish draining", "err", err)
		}
		if err := n.http.Shutdown(ctx); err != nil {
			n.log.Warn("http shutdown", "err", err)
			n.http.Close()
		}
		n.playbacks.Close()  // their members leave while the sessions are there
		n.recordings.Close() // before the rooms go: each recording ends "finished"
		n.sessions.Drain()
		n.stopErr = n.closeAll()
		n.log.Info("node stopped", "node", n.cfg.NodeID)
	})
	return n.stopErr
}

// closeAll releases what was opened, in reverse order; it tolerates nils so
// a failed Start can use it.
func (n *Node) closeAll() error {
	var errs []error
	defer n.stalls.stop()
	if n.hbCancel != nil {
		n.hbCancel()
		<-n.hbDone
	}
	if n.govStop != nil {
		n.govStop()
	}
	if n.http != nil {
		n.http.Close()
	}
	if n.playbacks != nil {
		n.playbacks.Close()
	}
	if n.hls != nil {
		n.hls.Close()
		n.thumbnails.Close()
	}
	if n.composites != nil {
		n.composites.Close()
	}
	if n.recordings != nil {
		n.recordings.Close()
	}
	if n.super != nil {
		n.super.Close()
	}
	if n.mixers != nil {
		n.mixers.Close()
	}
	if n.sip != nil {
		errs = append(errs, n.sip.Close())
	}
	if n.rtc != nil {
		n.rtc.Close()
	}
	if n.transcode != nil {
		n.transcode.Close()
	}
	if n.vtranscode != nil {
		n.vtranscode.Close()
	}
	if n.relayNG != nil {
		errs = append(errs, n.relayNG.Close())
	}
	if n.relay != nil {
		errs = append(errs, n.relay.Close())
	}
	if n.socks.RTP != nil {
		errs = append(errs, n.socks.RTP.Close())
	}
	if n.socks.RTCP != nil {
		errs = append(errs, n.socks.RTCP.Close())
	}
	if n.pingStop != nil {
		n.pingStop()
	}
	if n.registry != nil {
		n.registry.Close()
	}
	if n.sessionWatch != nil {
		_ = n.sessionWatch.Unsubscribe()
	}
	if n.bridge != nil {
		n.bridge.Shutdown()
	}
	for _, c := range n.bridgeConns {
		c.close()
	}
	if n.bus != nil {
		if err := n.bus.NodeEvent(bus.EventStopped, nil); err != nil {
			n.log.Debug("publish stopped", "err", err)
		}
		n.bus.Close()
	}
	if n.cat != nil {
		errs = append(errs, n.cat.Close())
	}
	return errors.Join(errs...)
}
