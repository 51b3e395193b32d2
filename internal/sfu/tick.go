package sfu

import (
	"context"
	"time"

	"github.com/convene/convene/internal/broker"
)

// tick runs a room's periodic work: track bit rates, simulcast choices,
// active speakers (every 500 ms) and quality reports (every 2 s).
func (s *SFU) tick(ctx context.Context, r *room) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			peers := s.roomPeers(r)
			seen := map[*broker.Track]bool{}
			for _, p := range peers {
				for tr := range *p.routes.Load() {
					if !seen[tr] {
						seen[tr] = true
						measure(tr, now)
					}
				}
			}
			for _, p := range peers {
				p.chooseAll()
			}
			r.speakers.tick()
			if n%4 == 0 {
				s.reportQuality(peers)
			}
		}
	}
}

// reportQuality sends every browser of a room the connection quality of
// each member: the loss of what it publishes, and the loss, jitter and
// round trip of what it receives, as its browser reports them.
func (s *SFU) reportQuality(peers []*Peer) {
	q := map[string]Quality{}
	for _, p := range peers {
		var loss, jitter, rtt float64
		for _, u := range p.upTracks() {
			loss = max(loss, u.windowLoss())
		}
		for _, d := range p.downTracks() {
			loss = max(loss, f64(&d.loss))
			jitter = max(jitter, f64(&d.jitter))
			rtt = max(rtt, f64(&d.rtt))
		}
		score := "good"
		switch {
		case loss > 0.08 || rtt > 400 || jitter > 60:
			score = "poor"
		case loss > 0.02 || rtt > 150 || jitter > 30:
			score = "fair"
		}
		q[p.member] = Quality{Score: score, Loss: loss, RTTMs: rtt, JitterMs: jitter}
	}
	for _, p := range peers {
		p.send(Frame{Type: "quality", Members: q})
	}
}
