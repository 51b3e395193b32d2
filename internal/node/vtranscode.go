package node

import (
	"log/slog"
	"path/filepath"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/supervise"
	"github.com/convene/convene/internal/vtranscode"
)

// startVTranscode makes the video transcoders' hub (under
// <data_dir>/vtranscode); nil when vtranscode.max is 0: receivers then
// get no camera of a codec they cannot take.
func startVTranscode(cfg config.Config, gov *capacity.Governor, super *supervise.Supervisor, m *vtranscode.Metrics, log *slog.Logger) *vtranscode.Hub {
	v := cfg.VTranscode
	if v.Max == 0 {
		return nil
	}
	return vtranscode.NewHub(vtranscode.Options{Dir: filepath.Join(cfg.DataDir, "vtranscode"), FFmpeg: cfg.Streaming.FFmpeg,
		Max: v.Max, Cores: v.Cores, MaxWidth: v.MaxHeight * 16 / 9, MaxHeight: v.MaxHeight, MaxFPS: v.MaxFPS,
		Admit: gov.Admit, Supervisor: super, Metrics: m, Logger: log.With("component", "vtranscode")})
}

// linkTranscoder is the hub as a receiving RTP video link that names its
// codec uses it (session.VideoTranscoder): the hub's caps, no size or
// rate of its own.
type linkTranscoder struct{ h *vtranscode.Hub }

func (l linkTranscoder) Needs(t *broker.Track, codec string) (bool, bool) {
	return vtranscode.Needs(t, codec)
}

func (l linkTranscoder) Subscribe(room *broker.Room, t *broker.Track, codec string, out broker.Sink) (func(), error) {
	sub, err := l.h.Subscribe(room, t, vtranscode.Target{Codec: codec}, out)
	if err != nil {
		return nil, err
	}
	return sub.Stop, nil
}
