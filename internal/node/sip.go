package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/sip"
	"github.com/convene/convene/internal/sipusers"
	"github.com/prometheus/client_golang/prometheus"
)

// SIPRealm is the digest realm of cfg: sip.domain, else the advertised
// host, else the listen host ("127.0.0.1" for an unspecified one). The
// `convene users` command uses it too, so accounts match the registrar.
func SIPRealm(cfg config.SIPConfig) string {
	if cfg.Domain != "" {
		return cfg.Domain
	}
	if cfg.Advertise != "" {
		return cfg.Advertise
	}
	host := cfg.Listen
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.Trim(host, "[]")
	switch host {
	case "", "0.0.0.0", "::":
		return "127.0.0.1"
	}
	return host
}

// startSIP opens the SIP account service and the registrar/proxy, whose
// calls' media goes through rl.
func startSIP(ctx context.Context, cfg config.SIPConfig, cat *catalog.Store, rl *relay.Relay, confs sip.Conferences,
	reg prometheus.Registerer, log *slog.Logger) (*sipusers.Service, *sip.Server, error) {
	realm := SIPRealm(cfg)
	users, err := sipusers.New(sipusers.Options{Catalog: cat, Realm: realm, MinPassword: cfg.MinPasswordLength})
	if err != nil {
		return nil, nil, err
	}
	if err := users.Preload(ctx); err != nil {
		return nil, nil, err
	}
	var algs []string
	for a := range strings.SplitSeq(cfg.Algorithms, ",") {
		algs = append(algs, strings.TrimSpace(a))
	}
	o := sip.Options{Listen: cfg.Listen, Advertise: cfg.Advertise, Domain: realm, Expires: cfg.Expires.Std(),
		NATExpires: cfg.NATExpires.Std(), ProbeInterval: cfg.ProbeInterval.Std(), Algorithms: algs,
		AuthCalls: cfg.AuthCalls, RegisterRate: float64(cfg.RegisterRate), InviteRate: float64(cfg.InviteRate),
		RequestRate: float64(cfg.RequestRate), MaxContacts: cfg.MaxContacts, TCPIdle: cfg.TCPIdleTimeout.Std(),
		TCPMaxConns: cfg.TCPMaxConns, TCPMaxConnsPerIP: cfg.TCPMaxConnsPerIP,
		Users: users, Catalog: cat, Logger: log, Registry: reg, Conferences: confs}
	if rl != nil {
		o.Media = rl
	}
	srv, err := sip.New(ctx, o)
	if err != nil {
		return nil, nil, fmt.Errorf("sip: %w", err)
	}
	return users, srv, nil
}

// SIPAddr returns the SIP listener's host:port (UDP and TCP).
func (n *Node) SIPAddr() string { return n.sip.Addr() }
