package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/sfu"
	"github.com/convene/convene/internal/transcode"
	"github.com/convene/convene/internal/vtranscode"
)

// startRTC starts the node's WebRTC (nil when webrtc.enabled is off).
func startRTC(cfg config.Config, sessions *session.Service, gov *capacity.Governor, hub *transcode.Hub, vhub *vtranscode.Hub, conv *chat.Service,
	failover func() []capacity.Alternative, place func(string) (capacity.Alternative, bool), reg prometheus.Registerer, log *slog.Logger) (*sfu.SFU, error) {
	w := cfg.WebRTC
	if !w.Enabled {
		return nil, nil
	}
	addr := w.Addr
	if addr == "" {
		addr = cfg.RTP.Addr
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("webrtc.addr: %w", err)
	}
	var servers []sfu.ICEServer
	for _, u := range config.SplitList(w.ICEServers) {
		s := sfu.ICEServer{URLs: []string{u}}
		if strings.HasPrefix(u, "turn") {
			s.Username, s.Credential = w.TURNUsername, w.TURNCredential
		}
		servers = append(servers, s)
	}
	rtc, err := sfu.New(sfu.Config{Addr: a.Unmap(), UDPPort: w.UDPPort, PortMin: uint16(w.PortMin), PortMax: uint16(w.PortMax),
		TCPPort: w.TCPPort, PublicIPs: config.SplitList(w.PublicIPs), ICEServers: servers, MaxPeers: w.MaxPeers,
		MaxTracks: w.MaxTracks, MaxBitrate: w.MaxBitrate, Queue: cfg.RTP.Queue, NoDirectAudio: !w.DirectAudio, Transcode: hub, Video: vhub, Logger: log,
		Admit: sessions.Admit, Shed: gov.Level, Conversations: rtcConversations{conv, sessions}, Failover: failover, Place: place}, sessions)
	if err != nil {
		return nil, err
	}
	rtc.Metrics().Register(reg)
	log.Info("webrtc ready", "addr", a, "udp_port", rtc.UDPPort(), "tcp_port", rtc.TCPPort())
	return rtc, nil
}

// rtcConversations gives a browser member's "conversation" data channel
// its place in the session's conversation, as the conversation WebSocket
// does (api/conversation.go): only a member still in the session, under
// its own name.
type rtcConversations struct {
	chat     *chat.Service
	sessions *session.Service
}

func (c rtcConversations) Attach(ctx context.Context, sessionID, memberID string) (sfu.DataConn, error) {
	ms, err := c.sessions.Members(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.ID == memberID {
			return c.chat.Attach(ctx, sessionID, memberID, m.Name)
		}
	}
	return nil, errors.New("not a member of this session any more")
}
