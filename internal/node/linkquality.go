package node

import (
	"sort"
	"time"

	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/rtplink"
)

const (
	// lossyFraction is the fraction lost above which a link counts as
	// lossy in the heartbeat.
	lossyFraction = 0.05
	// recentReport is how recent a link's last receiver report must be
	// for the heartbeat to count it (RTCP's interval is 5 s at least).
	recentReport = 30 * time.Second
	// maxLossiest is how many lossy links a heartbeat names.
	maxLossiest = 8
)

// linkSummary is the heartbeat's summary of the plain RTP links' receiver
// reports (by link ID, session.Load.Quality): those that reported within
// recentReport of now, how many of them lose more than lossyFraction, the
// lossiest by ID, and the largest jitter. nil when none reported.
func linkSummary(qs map[string]rtplink.Quality, now time.Time) *bus.LinkQuality {
	var (
		out   bus.LinkQuality
		lossy []string
	)
	for id, q := range qs {
		if now.Sub(q.LastReport) > recentReport {
			continue
		}
		out.Reporting++
		out.MaxJitterSeconds = max(out.MaxJitterSeconds, q.JitterSeconds)
		if q.FractionLost > lossyFraction {
			lossy = append(lossy, id)
		}
	}
	if out.Reporting == 0 {
		return nil
	}
	sort.Slice(lossy, func(i, j int) bool {
		if a, b := qs[lossy[i]].FractionLost, qs[lossy[j]].FractionLost; a != b {
			return a > b
		}
		return lossy[i] < lossy[j]
	})
	out.Lossy = len(lossy)
	out.Lossiest = lossy[:min(len(lossy), maxLossiest)]
	return &out
}
