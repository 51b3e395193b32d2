package recording

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Estimates of a track's bit rate, for admission: what a recording of a
// room reserves of the node's capacity per track it has when it starts.
const (
	AudioEstimate = 128_000   // bits/s: Opus or G.711 with headroom
	VideoEstimate = 2_500_000 // bits/s: a 720p VP8 or H.264 camera
)

// Estimate is the bit rate a recording of tracks reserves: AudioEstimate
// per audio track and VideoEstimate per video track, AudioEstimate at
// least (a room without tracks yet will get some).
func Estimate(tracks []*broker.Track) float64 {
	var need float64
	for _, t := range tracks {
		if t.Kind() == media.Video {
			need += VideoEstimate
		} else {
			need += AudioEstimate
		}
	}
	return max(need, AudioEstimate)
}

// probeBlock is the recorder's write: each stream's buffer (16 KiB) handed
// to the kernel in one write(2).
const probeBlock = 16 << 10

// ProbeDisk measures how fast dir's disk takes a recording's writes: it
// writes size bytes in 16 KiB writes (the recorder's per-stream buffer)
// to a temporary file, fsyncs it (the recorder syncs every 2 s), removes
// it, and returns the rate in bits per second.
func ProbeDisk(dir string, size int64) (float64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, probeBlock)
	for i := range buf {
		buf[i] = byte(i * 7) // not all zeros: no filesystem shortcut
	}
	start := time.Now()
	for n := int64(0); n < size; n += probeBlock {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("recording: disk probe in %s: %w", dir, err)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("recording: disk probe in %s: %w", dir, err)
	}
	d := time.Since(start)
	if d <= 0 {
		d = time.Nanosecond
	}
	return float64(size) * 8 / d.Seconds(), nil
}

// dirSize sums the sizes of the regular files in dir (not recursive: a
// recording's directory is flat).
func dirSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := os.Lstat(filepath.Join(dir, e.Name())); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// Metrics are the recording service's collectors:
//
//	convene_recording_capacity_bits        the disk capacity recordings are admitted against (bits/s)
//	convene_recording_reserved_bits        what the running recordings reserved of it (bits/s)
//	convene_recording_refused_total{reason} recordings refused: capacity, quota, adhoc (the cap of ad-hoc ones)
type Metrics struct {
	capacity prometheus.Gauge
	reserved prometheus.Gauge
	refused  *prometheus.CounterVec
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		capacity: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_recording_capacity_bits",
			Help: "Bits per second of the node's disk that recordings are admitted against (probed or configured)."}),
		reserved: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_recording_reserved_bits",
			Help: "Bits per second the running recordings reserved of the capacity (estimates per track)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_recording_refused_total",
			Help: "Recordings refused, by reason (capacity: 503; quota: 507; adhoc: the ad-hoc cap, 503)."}, []string{"reason"}),
	}
	m.refused.WithLabelValues("capacity")
	m.refused.WithLabelValues("quota")
	m.refused.WithLabelValues("adhoc")
	return m
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.capacity, m.reserved, m.refused)
}
