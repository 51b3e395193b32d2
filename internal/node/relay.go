package node

import (
	"fmt"
	"log/slog"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/relay/ng"
	"github.com/prometheus/client_golang/prometheus"
)

// startRelay opens the RTP relay for proxied SIP calls from cfg, with its
// metrics in reg, and its ng control server when cfg.NGAddr is set.
func startRelay(cfg config.RelayConfig, reg prometheus.Registerer, log *slog.Logger) (*relay.Relay, *ng.Server, error) {
	r, err := relay.New(relay.Options{Addr: cfg.Addr, PortMin: cfg.PortMin, PortMax: cfg.PortMax,
		Timeout: cfg.Timeout.Std(), Logger: log, Registry: reg, Kernel: cfg.Kernel,
		MaxPacket: cfg.MaxPacket, LatchWindow: cfg.LatchWindow.Std(), MaxStreamsPerCall: cfg.MaxStreamsPerCall,
		MaxStreamsPerUser: cfg.MaxStreamsPerUser, MaxStreamsPerSource: cfg.MaxStreamsPerSource})
	if err != nil {
		return nil, nil, err
	}
	if cfg.NGAddr == "" {
		return r, nil, nil
	}
	s, err := ng.Listen(cfg.NGAddr, r, log)
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("relay ng control: %w", err)
	}
	return r, s, nil
}

// Relay returns the node's RTP relay, which the SIP proxy hands the SDP of
// the calls it proxies.
func (n *Node) Relay() *relay.Relay { return n.relay }
