package sfu

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/convene/convene/internal/broker"
)

// tick runs a room's periodic work: track bit rates, simulcast choices,
// active speakers (every 500 ms), the subscribers' sender reports (every
// second) and quality reports (every 2 s).
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
					seen[tr] = true
				}
			}
			r.measure(seen, now)
			for _, p := range peers {
				p.chooseAll()
			}
			r.speakers.tick()
			if n%int(reportEvery/(500*time.Millisecond)) == 0 {
				for _, p := range peers {
					p.sendReports(now)
				}
			}
			if n%4 == 0 {
				s.reportQuality(r, peers)
			}
		}
	}
}

// reportQuality tells the browsers of a room the connection quality of
// each member: the loss of what it publishes, and the loss, jitter and
// round trip of what it receives, as its browser reports them. A frame
// carries only the members whose report changed noticeably (a newly
// joined browser gets them all), marshalled once for every browser: with N
// members a full report to each would cost N² every period.
func (s *SFU) reportQuality(r *room, peers []*Peer) {
	q := make(map[string]Quality, len(peers))
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
		q[p.member] = Quality{Score: score(loss, rtt, jitter), Loss: round(loss, 3), RTTMs: round(rtt, 0), JitterMs: round(jitter, 0)}
	}
	r.tellQuality(peers, q)
}

// tellQuality sends the browsers of a room the members' reports q.
//
// A room of up to largeRoom browsers tells every period what changed
// noticeably. A larger room tells only new scores, and only every
// qualityEvery periods, what changed since the last time: a score that
// flaps on a loaded network (each browser's round trip crossing a line)
// would otherwise reach every browser each period, N² entries that a
// room of a thousand, short of CPU already, must encode, send and decode.
// So a browser decodes at most about largeRoom entries a period, whatever
// the room's size. Its own member's new score, what its person acts on,
// goes to it alone at once. A browser that just joined gets every report
// the others hold.
func (r *room) tellQuality(peers []*Peer, q map[string]Quality) {
	if r.quality == nil {
		r.quality = map[string]Quality{}
	}
	every := qualityEvery(len(peers))
	r.qualityWait++
	var changed map[string]Quality
	var delta []byte
	if r.qualityWait >= every {
		r.qualityWait = 0
		changed = qualityDelta(r.quality, q, len(peers) > largeRoom)
		if len(changed) > 0 {
			delta, _ = json.Marshal(Frame{Type: "quality", Members: changed})
		}
	}
	var full []byte
	for _, p := range peers {
		own, known := q[p.member]
		switch {
		case !p.qualitySent:
			if full == nil {
				full, _ = json.Marshal(Frame{Type: "quality", Members: r.quality})
			}
			p.qualitySent = true
			p.ownQuality = r.quality[p.member]
			p.sendRaw(full)
		case delta != nil:
			p.sendRaw(delta)
			if x, ok := changed[p.member]; ok {
				p.ownQuality = x
			}
		case every > 1 && known && own.Score != p.ownQuality.Score:
			p.ownQuality = own
			p.send(Frame{Type: "quality", Members: map[string]Quality{p.member: own}})
		}
	}
}

// qualityEvery is the quality periods between reports to every browser of
// a room of n browsers: 1 up to largeRoom, then one more for each
// largeRoom more.
func qualityEvery(n int) int {
	return max(1, (n+largeRoom-1)/largeRoom)
}

// qualityDelta returns the members of now whose report moved enough to be
// worth telling every browser (noticeable), and records what it returns in
// sent, the reports the browsers hold; members gone from now leave sent.
// Jitter and round trip wander by a few milliseconds every period on any
// network: before, every such wander went to every browser, N members'
// reports to N browsers every 2 s (a 600-member meeting's load client spent
// a quarter of its CPU decoding them).
//
// In a large room (more than largeRoom browsers) only a new score is
// news: nobody reads hundreds of members' round trips, and a room under
// load, where every number wanders, would otherwise spend the CPU it
// lacks telling every browser of every wander (N² frames).
func qualityDelta(sent, now map[string]Quality, large bool) map[string]Quality {
	changed := map[string]Quality{}
	for m, x := range now {
		old, ok := sent[m]
		if !ok || (large && old.Score != x.Score) || (!large && noticeable(old, x)) {
			changed[m] = x
			sent[m] = x
		}
	}
	for m := range sent {
		if _, ok := now[m]; !ok {
			delete(sent, m)
		}
	}
	return changed
}

// largeRoom is the browsers in a room above which only scores are news.
const largeRoom = 50

// noticeable says whether a member's report moved from old to x by what a
// person reading the member list would notice: another score, loss by half
// a percentage point, round trip or jitter by 10 ms and a quarter.
func noticeable(old, x Quality) bool {
	return old.Score != x.Score || math.Abs(old.Loss-x.Loss) >= 0.005 ||
		moved(old.RTTMs, x.RTTMs) || moved(old.JitterMs, x.JitterMs)
}

func moved(a, b float64) bool {
	d := math.Abs(a - b)
	return d >= 10 && d >= 0.25*max(a, b)
}

func score(loss, rtt, jitter float64) string {
	switch {
	case loss > 0.08 || rtt > 400 || jitter > 60:
		return "poor"
	case loss > 0.02 || rtt > 150 || jitter > 30:
		return "fair"
	}
	return "good"
}

// round keeps d decimals, so small changes do not count as a change.
func round(v float64, d int) float64 {
	f := math.Pow(10, float64(d))
	return math.Round(v*f) / f
}
