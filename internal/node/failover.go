package node

import (
	"context"
	"log/slog"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/recording"
	"github.com/convene/convene/internal/registry"
	"github.com/convene/convene/internal/session"
)

// failover brings back, on the node that owns a session, what a dead node
// ran of it (issue 16): its plain RTP links (session.Service.Rehome), its
// recordings, continued in a new segment (recording.Service.Adopt), and
// its phones' calls, re-INVITEd to this node (phoneCalls.takeOver), and
// the HLS streams and composites started through the API, started again
// with the same request (keeper.adopt, services.go).
// A node is dead when the registry has not heard it for its stale time
// (5 s), or, at a takeover, when it is the owner whose lease expired (it
// stopped serving one renewal before, by fencing). Only the session's
// owner acts, and every move is fenced by its lease in the catalog, so
// exactly one survivor restarts each thing.
//
//	kill -9 A ─▶ A's lease of s expires (≤ 6 s) ─▶ B takes s over (next round, ≤ 2 s)
//	             ─▶ OnTakeOver(s, A): A's links re-homed (takeOwnership), A's recordings continue on B,
//	                A's HLS stream and composites start again on B
//	kill -9 C (not an owner) ─▶ stale in B's registry (5 s) ─▶ B's next round (≤ 2 s): the same for C
//
// Every round the node also stops the recording segments it writes,
// closes the links it serves, stops the HLS streams and composites it
// runs and lets go of the phones' calls it answers that the catalog says
// moved on (recording.Service.Fence, session.Service.DropMovedLinks,
// keeper.fence, phoneCalls.fence): a node that was only cut off, and
// taken for dead, stops serving them. And it ends
// the recordings of sessions no longer active whose node is dead
// (recording.Service.EndStranded): nobody else would.
type failover struct {
	self       string
	cat        *catalog.Store
	sessions   *session.Service
	recordings *recording.Service
	registry   *registry.Registry
	calls      *phoneCalls // the phones' calls (set once SIP runs)
	// kept starts again the HLS streams and composites of dead nodes.
	kept *keeper
	log  *slog.Logger
}

// round restarts what dead nodes ran of every session this node owns, and
// stops what moved on from here; after every lease round
// (session.Options.OnRound).
func (f *failover) round(ctx context.Context) {
	f.recordings.Fence(ctx)
	f.sessions.DropMovedLinks(ctx)
	f.calls.fence(ctx)
	f.kept.fence(ctx)
	if n, err := f.recordings.EndStranded(ctx, f.gone("")); err != nil {
		f.log.Warn("failover: end stranded recordings", "ended", n, "err", err)
	}
	if !f.anyGone(ctx) {
		return // the usual round: one query, not two a session
	}
	for _, l := range f.sessions.Leases() {
		f.session(ctx, l.SessionID, "")
	}
}

// gone tells whether a node is taken for dead: not this one, and from
// (a node known to have stopped serving) or gone by the registry.
func (f *failover) gone(from string) func(node string) bool {
	return func(node string) bool {
		return node != f.self && (node == from || f.registry.Gone(node))
	}
}

// anyGone reports whether a node that runs links, recordings, HLS
// streams or composites of a session is gone, or a recording or such a
// service has no node (true when the catalog
// cannot tell: the sessions' own queries then fail or find nothing).
func (f *failover) anyGone(ctx context.Context) bool {
	nodes, err := f.cat.ServiceNodes(ctx)
	if err != nil {
		return true
	}
	for _, n := range nodes {
		if n == "" || (n != f.self && f.registry.Gone(n)) {
			return true
		}
	}
	return false
}

// session restarts what dead nodes ran of a session this node owns; from,
// if set, is a node known to have stopped serving it (the owner it took
// the session over from).
func (f *failover) session(ctx context.Context, id, from string) {
	gone := f.gone(from)
	nodes, err := f.cat.LinkNodes(ctx, id)
	if err != nil {
		f.log.Warn("failover: the session's link nodes", "session", id, "err", err)
	}
	for _, node := range nodes {
		if node != from && gone(node) { // from's links moved with the takeover
			if err := f.sessions.Rehome(ctx, id, node); err != nil {
				f.log.Warn("failover: re-home links", "session", id, "node", node, "err", err)
			}
		}
	}
	l, ok := f.sessions.Lease(id)
	if !ok {
		return
	}
	if n, err := f.recordings.Adopt(ctx, l, gone); err != nil {
		f.log.Warn("failover: continue recordings", "session", id, "continued", n, "err", err)
	}
	f.calls.takeOver(ctx, l, gone)
	if n, err := f.kept.adopt(ctx, l, gone); err != nil {
		f.log.Warn("failover: start HLS and composites again", "session", id, "started", n, "err", err)
	}
}
