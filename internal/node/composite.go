package node

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/supervise"
)

// linkComposite is the type of a composite's live link in its session.
const linkComposite = "composite"

// startComposites makes the video composite service (under
// <data_dir>/composites): its pictures are published by a session member
// of their own with one live link, like a playback's tracks.
func startComposites(cfg config.Config, sessions *session.Service, gov *capacity.Governor, super *supervise.Supervisor,
	reg prometheus.Registerer, log *slog.Logger) *composite.Service {
	m := composite.NewMetrics()
	m.Register(reg)
	return composite.NewService(composite.Options{Dir: filepath.Join(cfg.DataDir, "composites"), FFmpeg: cfg.Streaming.FFmpeg,
		Max: cfg.Composite.Max, Cores: cfg.Composite.Cores, Rooms: sessions.Room,
		Members: func(sid string) []composite.Member {
			ms, err := sessions.Members(context.Background(), sid)
			if err != nil {
				return nil
			}
			out := make([]composite.Member, len(ms))
			for i, m := range ms {
				out[i] = composite.Member{ID: m.ID, Name: m.Name}
			}
			return out
		},
		Publish: func(sid, name string, info broker.TrackInfo) (composite.Outlet, error) {
			return publishComposite(sessions, sid, name, info)
		},
		Admit: gov.Admit, Supervisor: super, Metrics: m, Logger: log.With("component", "composite")})
}

// publishComposite joins a member to the session and attaches its one
// live link, a video track the composite publishes on.
func publishComposite(sessions *session.Service, sid, name string, info broker.TrackInfo) (composite.Outlet, error) {
	ctx := context.Background()
	m, err := sessions.Join(ctx, sid, name, "participant")
	if err != nil {
		return composite.Outlet{}, err
	}
	gone := make(chan struct{})
	var track *broker.Track
	info.Stream = m.ID
	l, err := sessions.AttachLive(ctx, sid, m.ID, session.NewLiveLink{Type: linkComposite, Kind: media.Video, Sends: true, Source: "composite"},
		func(room *broker.Room, at session.Place) (session.Media, error) {
			// The session closes the link when it takes the member away:
			// the composite then stops.
			l, bt, err := session.NewNodeTrack(room, at, media.Video, info, func() { close(gone) })
			track = bt
			return l, err
		})
	if err != nil {
		_ = sessions.Leave(ctx, sid, m.ID)
		return composite.Outlet{}, err
	}
	return composite.Outlet{Track: track, Member: m.ID, Gone: gone, Close: func() {
		sessions.DetachLive(sid, l.ID)
		_ = sessions.Leave(context.Background(), sid, m.ID)
	}}, nil
}
