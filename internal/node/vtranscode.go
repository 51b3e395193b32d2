package node

import (
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/supervise"
	"github.com/convene/convene/internal/vtranscode"
)

// startVTranscode makes the video transcoders' hub (under
// <data_dir>/vtranscode); nil when vtranscode.max is 0: receivers then
// get no camera of a codec they cannot take.
func startVTranscode(cfg config.Config, gov *capacity.Governor, super *supervise.Supervisor, reg prometheus.Registerer, log *slog.Logger) *vtranscode.Hub {
	m := vtranscode.NewMetrics()
	m.Register(reg)
	v := cfg.VTranscode
	if v.Max == 0 {
		return nil
	}
	return vtranscode.NewHub(vtranscode.Options{Dir: filepath.Join(cfg.DataDir, "vtranscode"), FFmpeg: cfg.Streaming.FFmpeg,
		Max: v.Max, Cores: v.Cores, MaxWidth: v.MaxHeight * 16 / 9, MaxHeight: v.MaxHeight, MaxFPS: v.MaxFPS,
		Admit: gov.Admit, Supervisor: super, Metrics: m, Logger: log.With("component", "vtranscode")})
}
