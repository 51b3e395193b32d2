package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/event"
)

const (
	// readyTimeout bounds how long Connect waits for the embedded server.
	readyTimeout = 10 * time.Second
	// drainTimeout bounds how long Close waits for the connection to drain.
	drainTimeout = 5 * time.Second
	// closeGrace is added to drainTimeout before Close gives up waiting.
	closeGrace = time.Second
)

// Options configures Connect.
type Options struct {
	// URL of an external NATS deployment. Empty starts an embedded server.
	URL string
	// Listen ("host:port") makes the embedded server accept TCP clients
	// there. Port 0 or -1 picks a random free port. Ignored with URL.
	// Empty means in-process only.
	Listen string
	// NodeID identifies this node; it must be a valid subject token.
	NodeID string
	// Logger receives connection state changes. nil discards.
	Logger *slog.Logger
	// StoreDir is passed to the embedded server (JetStream stays disabled).
	StoreDir string

	// Version is reported in heartbeats. Empty reports "dev".
	Version string
	// Now is the clock used for event timestamps and uptime. nil uses time.Now.
	Now func() time.Time
}

// Bus is a connection to the control plane.
type Bus struct {
	nc        *nats.Conn
	srv       *server.Server // nil when external
	url       string         // Options.URL, for Dial
	clientURL string
	nodeID    string
	version   string
	log       *slog.Logger
	now       func() time.Time
	started   time.Time

	connClosed chan struct{} // closed by the nats ClosedHandler

	mu      sync.Mutex
	closing bool
	public  Public        // SetPublic, read by each heartbeat
	done    chan struct{} // closed when Close starts; stops heartbeats
	hbWG    sync.WaitGroup

	closeOnce sync.Once
}

// Connect starts an embedded NATS server or connects to opts.URL.
func Connect(ctx context.Context, opts Options) (*Bus, error) {
	if err := ValidateToken(opts.NodeID); err != nil {
		return nil, fmt.Errorf("bus: node id: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Bus{
		url:        opts.URL,
		nodeID:     opts.NodeID,
		version:    opts.Version,
		log:        opts.Logger,
		now:        opts.Now,
		connClosed: make(chan struct{}),
		done:       make(chan struct{}),
	}
	if b.version == "" {
		b.version = "dev"
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.log = b.log.With("component", "bus", "node_id", opts.NodeID)
	if b.now == nil {
		b.now = time.Now
	}
	b.started = b.now()

	var closedOnce sync.Once
	natsOpts := []nats.Option{
		nats.Name("convene-" + opts.NodeID),
		nats.DrainTimeout(drainTimeout),
		nats.ClosedHandler(func(*nats.Conn) {
			closedOnce.Do(func() { close(b.connClosed) })
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			b.log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}

	if opts.URL == "" {
		srv, err := startEmbedded(opts)
		if err != nil {
			return nil, err
		}
		b.srv = srv
		if opts.Listen != "" {
			b.clientURL = embeddedClientURL(srv)
		}
		natsOpts = append(natsOpts, nats.InProcessServer(srv))
		nc, err := nats.Connect("", natsOpts...)
		if err != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("bus: connect to embedded server: %w", err)
		}
		b.nc = nc
		b.log.Info("embedded nats server started", "server", srv.Name(), "client_url", b.clientURL)
	} else {
		b.clientURL = redactURLs(opts.URL)
		natsOpts = append(natsOpts,
			nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				b.log.Warn("nats disconnected", "err", err)
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				b.log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			}),
		)
		nc, err := nats.Connect(opts.URL, natsOpts...)
		if err != nil {
			return nil, fmt.Errorf("bus: connect to %s: %w", redactURLs(opts.URL), err)
		}
		b.nc = nc
		b.log.Info("connected to nats", "url", nc.ConnectedUrlRedacted())
	}

	if err := ctx.Err(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func startEmbedded(opts Options) (*server.Server, error) {
	so := &server.Options{
		ServerName: "convene-" + opts.NodeID,
		DontListen: true,
		NoSigs:     true,
		NoLog:      true,
		JetStream:  false,
		StoreDir:   opts.StoreDir,
	}
	if opts.Listen != "" {
		host, portStr, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: listen address %q: %w", opts.Listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < -1 || port > 65535 {
			return nil, fmt.Errorf("bus: listen address %q: invalid port", opts.Listen)
		}
		if port == 0 {
			port = server.RANDOM_PORT // nats-server treats 0 as "default 4222"
		}
		so.DontListen = false
		so.Host = host
		so.Port = port
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("bus: embedded server not ready for connections")
	}
	return srv, nil
}

// embeddedClientURL returns the server's client URL, replacing an
// unspecified listen host with loopback so the URL is dialable.
func embeddedClientURL(srv *server.Server) string {
	raw := srv.ClientURL()
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return raw
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		u.Host = net.JoinHostPort("127.0.0.1", port)
	}
	return u.String()
}

// redactURLs is redactURL for each URL of a comma-separated list, as
// nats.url may be.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(raw, "@"):
		return "(a URL with credentials that does not parse)"
	case err != nil || u.User == nil:
		return raw
	}
	return u.Redacted()
}

// Dial opens another connection to the same NATS (the embedded server in
// process, or the external cluster with reconnects for ever), named
// convene-<node>-<name>: the cross-node media bridge sends audio and video
// on connections of their own. The caller closes it.
func (b *Bus) Dial(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("convene-" + b.nodeID + "-" + name)}
	if b.srv != nil {
		opts = append(opts, nats.InProcessServer(b.srv))
	} else {
		opts = append(opts, nats.MaxReconnects(-1))
	}
	nc, err := nats.Connect(b.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", name, err)
	}
	return nc, nil
}

// Conn returns the underlying NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// Embedded reports whether the bus runs its own in-process server.
func (b *Bus) Embedded() bool { return b.srv != nil }

// ClientURL returns a URL outside tools can connect to: the embedded
// server's client URL when Options.Listen was set, Options.URL for an
// external server (with any password in it masked: the node logs it and
// GET /api/v1/node shows it), and "" for an in-process-only embedded
// server.
func (b *Bus) ClientURL() string { return b.clientURL }

// NodeID returns this node's ID.
func (b *Bus) NodeID() string { return b.nodeID }

// Close stops running heartbeats, drains the connection (bounded by a
// timeout) and shuts down the embedded server. It is safe to call more than
// once and from several goroutines.
func (b *Bus) Close() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		close(b.done)
		b.mu.Unlock()
		b.hbWG.Wait()

		if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			b.log.Warn("nats drain failed", "err", err)
		}
		select {
		case <-b.connClosed:
		case <-time.After(drainTimeout + closeGrace):
			b.log.Warn("nats drain timed out; closing")
		}
		b.nc.Close()
		<-b.connClosed // Close always invokes the ClosedHandler

		if b.srv != nil {
			b.srv.Shutdown()
			b.srv.WaitForShutdown()
			b.log.Info("embedded nats server stopped")
		}
	})
}

// Event is the JSON envelope of every message on the bus.
type Event struct {
	Type      string    `json:"type"`
	SessionID string    `json:"session_id,omitempty"`
	NodeID    string    `json:"node_id"`
	Time      time.Time `json:"time"`
	Data      any       `json:"data,omitempty"`
	// Seq is the event's number in its session's stream (internal/events).
	Seq uint64 `json:"seq,omitempty"`
}

// Publish JSON-encodes ev and publishes it on subject. An empty NodeID is
// set to this node's ID and a zero Time to the current time (UTC).
func (b *Bus) Publish(subject string, ev Event) error {
	if subject == "" {
		return errors.New("bus: empty subject")
	}
	if ev.NodeID == "" {
		ev.NodeID = b.nodeID
	}
	if ev.Time.IsZero() {
		ev.Time = b.now().UTC()
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("bus: encode %s event: %w", ev.Type, err)
	}
	if err := b.nc.Publish(subject, payload); err != nil {
		return fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	return nil
}

// SessionEvent publishes a session event of type typ on
// convene.session.<sessionID>.<typ>.
func (b *Bus) SessionEvent(sessionID string, typ event.Type, data any) error {
	subject, err := SessionSubject(sessionID, typ)
	if err != nil {
		return err
	}
	return b.Publish(subject, Event{Type: typ.String(), SessionID: sessionID, Data: data})
}

// SessionEventSeq is SessionEvent with the event's sequence number in its
// session's stream.
func (b *Bus) SessionEventSeq(sessionID string, typ event.Type, seq uint64, data any) error {
	subject, err := SessionSubject(sessionID, typ)
	if err != nil {
		return err
	}
	return b.Publish(subject, Event{Type: typ.String(), SessionID: sessionID, Seq: seq, Data: data})
}

// NodeEvent publishes a node event of type typ (EventDraining, EventStopped,
// EventHeartbeat) for this node on convene.node.<nodeID>.<typ>.
func (b *Bus) NodeEvent(typ string, data any) error {
	subject, err := NodeSubject(b.nodeID, typ)
	if err != nil {
		return err
	}
	return b.Publish(subject, Event{Type: typ, Data: data})
}
