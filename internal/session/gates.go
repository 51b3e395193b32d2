package session

import (
	"sync"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// gates applies a session's floor control to the tracks of its links: a
// track is gated (broker.Track.SetGated) while its floor is enforced and its
// member holds no token of it. Its mutex comes after the floor
// controller's in the lock order; it calls nothing outside.
type gates struct {
	mu       sync.Mutex
	enforced [2]bool            // by media.Kind
	holders  [2]map[string]bool // by media.Kind
	muted    [2]map[string]bool // by media.Kind: members who muted themselves
	tracks   map[string]gatedTrack
}

type gatedTrack struct {
	member string
	kind   media.Kind
	track  *broker.Track
}

func newGates() *gates {
	return &gates{holders: [2]map[string]bool{{}, {}}, muted: [2]map[string]bool{{}, {}}, tracks: map[string]gatedTrack{}}
}

func (g *gates) closed(t gatedTrack) bool {
	return g.muted[t.kind][t.member] || g.enforced[t.kind] && !g.holders[t.kind][t.member]
}

// mute closes (or, unmuting, lets the floor decide) the gates of a
// member's tracks of kind, and reports whether that changed anything.
func (g *gates) mute(member string, k media.Kind, on bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.muted[k][member] == on {
		return false
	}
	if on {
		g.muted[k][member] = true
	} else {
		delete(g.muted[k], member)
	}
	for _, t := range g.tracks {
		if t.kind == k && t.member == member {
			t.track.SetGated(g.closed(t))
		}
	}
	return true
}

func (g *gates) isMuted(member string, k media.Kind) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.muted[k][member]
}

// set is the floor controller's Gate callback.
func (g *gates) set(floor string, enforced bool, holders map[string]bool) {
	k, ok := media.ParseKind(floor)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.enforced[k], g.holders[k] = enforced, holders
	for _, t := range g.tracks {
		if t.kind == k {
			t.track.SetGated(g.closed(t))
		}
	}
}

// add puts a link's track under the gate (member "" never holds a floor).
func (g *gates) add(linkID, member string, kind media.Kind, tr *broker.Track) {
	if tr == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := gatedTrack{member: member, kind: kind, track: tr}
	g.tracks[linkID] = t
	tr.SetGated(g.closed(t))
}

func (g *gates) remove(linkID string) {
	g.mu.Lock()
	delete(g.tracks, linkID)
	g.mu.Unlock()
}

// activity is the packets a member's tracks of a floor's kind have
// published: what activity sensing watches.
func (g *gates) activity(member, floor string) uint64 {
	k, _ := media.ParseKind(floor)
	g.mu.Lock()
	defer g.mu.Unlock()
	var n uint64
	for _, t := range g.tracks {
		if t.member == member && t.kind == k {
			p, _ := t.track.Stats()
			n += p
		}
	}
	return n
}
