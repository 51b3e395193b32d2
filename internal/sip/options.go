package sip

import (
	"context"
	"errors"
	"fmt"
	"github.com/emiago/sipgo/sip"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/sipusers"
	"github.com/prometheus/client_golang/prometheus"
)

// Users looks up the digest credentials of an account (sipusers.Service).
type Users interface {
	Lookup(ctx context.Context, username string) (c sipusers.Credentials, found bool, err error)
}

// Media rewrites the SDP of proxied calls through an RTP relay
// (internal/relay), in the manner of rtpengine's offer/answer/delete.
// Release ends a call's media without waiting for its ports to close: the
// proxy calls it from the workers that forward every UDP request. Offer's
// user is the authenticated SIP user ("" if none) and source the request's
// source IP (invalid if unknown): the relay caps the streams each holds.
type Media interface {
	Offer(callID, fromTag string, sdp []byte, user string, source netip.Addr) ([]byte, error)
	Answer(callID, fromTag, toTag string, sdp []byte, source netip.Addr) ([]byte, error)
	Release(callID string) error
}

// Timers are the RFC 3261 transaction timers. sipgo keeps them in package
// variables (sip.SetTimers), so they are process-wide: a program sets them
// once, before starting any Server (cmd/convene does), never a Server.
// Zero values keep the RFC's defaults (500ms, 4s, 5s).
type Timers struct {
	T1, T2, T4 time.Duration
}

// SetTimers sets the process's transaction timers (see Timers).
func SetTimers(t Timers) {
	if t.T1 == 0 {
		t.T1 = 500 * time.Millisecond
	}
	if t.T2 == 0 {
		t.T2 = 4 * time.Second
	}
	if t.T4 == 0 {
		t.T4 = 5 * time.Second
	}
	sip.SetTimers(t.T1, t.T2, t.T4)
}

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	// Listen is the host:port of the UDP and TCP listeners ("127.0.0.1:5060").
	// Port 0 picks a free port (the same one for both, see Server.Addr).
	Listen string
	// Advertise is the host put in Via and Record-Route; "" means the
	// listen host.
	Advertise string
	// Domain is the SIP domain and digest realm; "" means the advertised host.
	Domain string

	// Expires is the registration lifetime granted when the client asks for
	// none (default 3600s); MinExpires (60s) and MaxExpires (7200s) bound it.
	Expires, MinExpires, MaxExpires time.Duration
	// NATExpires caps the lifetime granted to NATed clients so their
	// re-registrations keep the NAT binding open (default 60s).
	NATExpires time.Duration
	// NonceTTL is how long a nonce may be reused (default 300s).
	NonceTTL time.Duration
	// NonceSlots is the number of nonces whose nonce-count is tracked
	// (power of two, default 1<<20); an older nonce is answered stale.
	NonceSlots int
	// Algorithms are the digest algorithms challenged with, in order of
	// preference (RFC 8760 section 2.4); default MD5, SHA-256, because
	// SIPp 3.6 and baresip 1.0 read only the first challenge and know only
	// MD5 (a client that knows both takes the first it supports).
	Algorithms []string
	// AuthCalls challenges out-of-dialog INVITEs with 407 (default false in
	// the zero value; the node config enables it).
	AuthCalls bool

	// RegisterRate and InviteRate are per-source-IP limits in requests per
	// second (0 disables); bursts of twice the rate are allowed.
	RegisterRate, InviteRate float64
	// RequestRate is the per-source-IP limit of every other method
	// (OPTIONS, MESSAGE, BYE, ACK, UPDATE, …) in requests per second.
	RequestRate float64
	// RetryAfter is the Retry-After of a rate-limited 503 (default 5s).
	RetryAfter time.Duration

	// ProbeInterval is how often registered contacts get an OPTIONS; a
	// contact that does not answer is dropped. 0 disables probing.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probed contact has to answer (default
	// Timer F, 64*T1).
	ProbeTimeout time.Duration
	// FlushInterval is how often changed bindings are written to the
	// catalog (default 500ms).
	FlushInterval time.Duration
	// Workers answer UDP REGISTERs; 0 means one per CPU.
	Workers int

	// DialogKey signs the Record-Route dialog tokens (dialog.go); nil
	// makes a random one, so dialogs do not outlive the process.
	DialogKey []byte
	// MaxContacts caps the contacts one account may register (default 10).
	MaxContacts int
	// TCPIdle closes a TCP connection that sent nothing for this long
	// (default 2 minutes; keep-alive CRLFs count). TCPMaxConns and
	// TCPMaxConnsPerIP cap accepted connections (default 4096 and 32).
	TCPIdle                       time.Duration
	TCPMaxConns, TCPMaxConnsPerIP int

	Users   Users
	Catalog *catalog.Store
	// Media, if set, relays the media of proxied calls.
	Media Media
	// Conferences, if set, lets phones dial into sessions.
	Conferences Conferences
	Logger      *slog.Logger
	Registry    prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() error {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:5060"
	}
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("sip: listen %q: %w", o.Listen, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("sip: listen %q: bad port", o.Listen)
	}
	if o.Advertise == "" {
		o.Advertise = host
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			o.Advertise = "127.0.0.1"
		}
	}
	if o.Domain == "" {
		o.Domain = o.Advertise
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Expires, time.Hour)
	def(&o.MinExpires, time.Minute)
	def(&o.MaxExpires, 2*time.Hour)
	def(&o.NATExpires, time.Minute)
	def(&o.NonceTTL, 5*time.Minute)
	def(&o.RetryAfter, 5*time.Second)
	def(&o.FlushInterval, 500*time.Millisecond)
	def(&o.TCPIdle, 2*time.Minute)
	if o.MaxContacts == 0 {
		o.MaxContacts = 10
	}
	if o.TCPMaxConns == 0 {
		o.TCPMaxConns = 4096
	}
	if o.TCPMaxConnsPerIP == 0 {
		o.TCPMaxConnsPerIP = 32
	}
	if len(o.Algorithms) == 0 {
		o.Algorithms = []string{"MD5", "SHA-256"}
	}
	for i, a := range o.Algorithms {
		switch strings.ToUpper(a) {
		case "MD5", "SHA-256":
			o.Algorithms[i] = strings.ToUpper(a)
		default:
			return fmt.Errorf("sip: digest algorithm %q: want SHA-256 or MD5", a)
		}
	}
	if o.NonceSlots == 0 {
		o.NonceSlots = 1 << 20
	}
	if o.NonceSlots&(o.NonceSlots-1) != 0 {
		return fmt.Errorf("sip: nonce slots %d: want a power of two", o.NonceSlots)
	}
	if o.Users == nil {
		return errors.New("sip: no user directory")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}
