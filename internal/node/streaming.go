package node

import (
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/hls"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/supervise"
	"github.com/convene/convene/internal/thumbnail"
)

// startStreaming makes the media services that run ffmpeg children: HLS
// of sessions (under <data_dir>/hls; its video a composite's if asked,
// whose member pins notes) and thumbnails of video tracks. HLS announces
// hls.started and hls.stopped on the session's events.
func startStreaming(cfg config.Config, sessions *session.Service, mixers *mixer.Service, composites *composite.Service,
	pins *pinMembers, super *supervise.Supervisor, ev hls.Publisher, reg prometheus.Registerer, log *slog.Logger) (*hls.Service, *thumbnail.Service) {
	hm, tm := hls.NewMetrics(), thumbnail.NewMetrics()
	hm.Register(reg)
	tm.Register(reg)
	h := hls.NewService(hls.Options{Dir: filepath.Join(cfg.DataDir, "hls"), FFmpeg: cfg.Streaming.FFmpeg,
		Max: cfg.Streaming.HLSMax, Segment: cfg.Streaming.HLSSegment.Std(), Rooms: sessions.Room, Mixers: mixers, Supervisor: super, Events: ev, Metrics: hm,
		Composite: func(sid string) (string, func(), error) {
			info, err := composites.Start(sid, composite.Request{Layout: composite.Grid2})
			if err != nil {
				return "", nil, err
			}
			pins.set(sid, info.Member)
			return info.Track, func() {
				pins.drop(sid, info.Member)
				_ = composites.Stop(sid, info.ID)
			}, nil
		},
		Logger: log.With("component", "hls")})
	t := thumbnail.NewService(thumbnail.Options{Dir: filepath.Join(cfg.DataDir, "thumbnails"), FFmpeg: cfg.Streaming.FFmpeg,
		Max: cfg.Streaming.ThumbnailsMax, Rooms: sessions.Room, Supervisor: super, Metrics: tm,
		Logger: log.With("component", "thumbnail")})
	return h, t
}

// pinMembers are the members that publish the HLS streams' own
// composites, by session: the catalog keeps a stream's (keeper), so that
// the node that starts it again after its node died removes the old one.
type pinMembers struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *pinMembers) set(session, member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[session] = member
}

// drop forgets a session's member if it is still member.
func (p *pinMembers) drop(session, member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[session] == member {
		delete(p.m, session)
	}
}

// get is the member of a session's stream's composite ("" for none).
func (p *pinMembers) get(session string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[session]
}
