package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/hls"
	"github.com/convene/convene/internal/session"
)

// keeper keeps, in a cluster, the HLS streams and composites started
// through the API (issue 16): each is a row of the catalog's
// media_services naming its request and the node running it (api.Kept),
// removed when it is stopped through the API or its session ends. When
// that node dies, the session's owner starts it again with the same
// request — an HLS stream under the same paths (it is the session's),
// a composite with the same ID — and moves the row to itself, fenced by
// its lease and by the node it read (adopt, from failover); it announces
// hls.moved or composite.moved. A node that was only cut off and sees
// that a service it runs moved on stops it here (fence).
//
// Those a node starts for itself are not kept: a SIP phone's composite
// (conference.go), an HLS stream's own composite, which starts again
// with its stream.
type keeper struct {
	self       string
	cat        *catalog.Store
	sessions   *session.Service
	hls        *hls.Service
	composites *composite.Service
	pins       *pinMembers
	// url is where clients reach this node ("" if unknown), for hls.moved;
	// urlOf where they reach another node ("" if unknown or gone).
	url   func() string
	urlOf func(node string) string
	log   *slog.Logger

	// mu orders fence's look at the catalog and the services here against
	// the rows this node writes; mine are the kept services this node
	// runs, by kind and ID.
	mu   sync.Mutex
	mine map[serviceKey]bool

	// elsewhere are the sessions' streams' nodes as streamURL last read
	// them from the catalog, for elsewhereTTL.
	elsewhereMu sync.Mutex
	elsewhere   map[string]streamAt
}

// streamAt is where a session's stream runs ("" for nowhere known) and
// until when that answer is kept.
type streamAt struct {
	url   string
	until time.Time
}

// elsewhereTTL is how long streamURL keeps an answer: a viewer fetches a
// part every 200 ms or so, and the catalog need not hear of each.
const elsewhereTTL = 2 * time.Second

type serviceKey struct{ kind, id string }

// keepTimeout bounds a catalog write of the API's hooks.
const keepTimeout = 5 * time.Second

// HLSStarted records a stream the API started here.
func (k *keeper) HLSStarted(session, by string, so hls.StartOptions) {
	k.put(catalog.MediaService{Kind: catalog.ServiceHLS, ID: session, SessionID: session, Member: k.pins.get(session),
		StartedBy: by}, so)
}

// CompositeStarted records a composite the API started here.
func (k *keeper) CompositeStarted(info composite.Info, by string) {
	k.put(catalog.MediaService{Kind: catalog.ServiceComposite, ID: info.ID, SessionID: info.Session, Member: info.Member,
		StartedBy: by}, info.Request)
}

func (k *keeper) put(m catalog.MediaService, req any) {
	b, err := json.Marshal(req)
	if err != nil {
		k.log.Warn("keep media service: its request", "kind", m.Kind, "id", m.ID, "err", err)
		return
	}
	m.Request, m.Node, m.StartedAt = string(b), k.self, time.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.cat.PutMediaService(ctx, m); err != nil {
		k.log.Warn("keep media service: it runs here but will not fail over", "kind", m.Kind, "id", m.ID,
			"session", m.SessionID, "err", err)
		return
	}
	k.mine[serviceKey{m.Kind, m.ID}] = true
}

// HLSStopped forgets a stream the API stopped here.
func (k *keeper) HLSStopped(session string) { k.remove(catalog.ServiceHLS, session) }

// CompositeStopped forgets a composite the API stopped here.
func (k *keeper) CompositeStopped(_, id string) { k.remove(catalog.ServiceComposite, id) }

func (k *keeper) remove(kind, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.mine, serviceKey{kind, id})
	if err := k.cat.RemoveMediaService(ctx, kind, id, k.self); err != nil {
		k.log.Warn("forget media service", "kind", kind, "id", id, "err", err)
	}
}

// sessionEnded forgets the services of a session that ended or was
// deactivated (their node stops them when its room goes).
func (k *keeper) sessionEnded(session string) {
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	if err := k.cat.RemoveSessionMediaServices(ctx, session); err != nil {
		k.log.Warn("forget the media services of an ended session", "session", session, "err", err)
	}
}

// orphan lets go, at start-up, of the services this node ran before it
// restarted (it runs none now), so that their sessions' owners start
// them again at once.
func (k *keeper) orphan(ctx context.Context) error {
	n, err := k.cat.OrphanMediaServices(ctx, k.self)
	if n > 0 {
		k.log.Info("media services of this node's last run let go", "count", n)
	}
	return err
}

// runs tells whether the service runs on this node.
func (k *keeper) runs(key serviceKey) bool {
	switch key.kind {
	case catalog.ServiceHLS:
		_, ok := k.hls.Get(key.id)
		return ok
	case catalog.ServiceComposite:
		for _, id := range k.composites.IDs() {
			if id == key.id {
				return true
			}
		}
	}
	return false
}

// fence stops here the kept services the catalog says run on another
// node now (this one was taken for dead: it was only cut off), without
// announcing their stop: they go on there. Of those that stopped here
// unasked (their room went: this node lost the session's lease, or left
// it), the row is let go for the session's owner to start them again,
// or removed if the member publishing its picture was removed. The node
// calls it every lease round.
func (k *keeper) fence(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.mine) == 0 {
		return
	}
	rows, err := k.cat.MediaServices(ctx, "")
	if err != nil {
		return // the catalog cannot tell; the leases decide about the rooms
	}
	byKey := make(map[serviceKey]catalog.MediaService, len(rows))
	for _, m := range rows {
		byKey[serviceKey{m.Kind, m.ID}] = m
	}
	for key := range k.mine {
		m, ok := byKey[key]
		switch {
		case !ok: // stopped elsewhere, or its session ended
			delete(k.mine, key)
		case m.Node != k.self:
			delete(k.mine, key)
			k.log.Warn("media service moved to another node: stopped here", "kind", key.kind, "id", key.id,
				"session", m.SessionID, "now_on", m.Node)
			k.stop(m)
		case !k.runs(key):
			if k.letGo(ctx, m) {
				delete(k.mine, key)
			}
		}
	}
}

// stop ends a service here that goes on elsewhere.
func (k *keeper) stop(m catalog.MediaService) {
	var err error
	switch m.Kind {
	case catalog.ServiceHLS:
		err = k.hls.Drop(m.SessionID)
	case catalog.ServiceComposite:
		err = k.composites.Stop(m.SessionID, m.ID)
	}
	if err != nil && !errors.Is(err, hls.ErrNotFound) && !errors.Is(err, composite.ErrNotFound) {
		k.log.Warn("stop a media service that moved on", "kind", m.Kind, "id", m.ID, "err", err)
	}
}

// letGo handles a kept service that stopped here unasked: removed if the
// member publishing its picture left the session (a chair took it away),
// else orphaned for the session's owner. It reports whether the catalog
// took it.
func (k *keeper) letGo(ctx context.Context, m catalog.MediaService) bool {
	if m.Kind == catalog.ServiceComposite && m.Member != "" {
		if _, err := k.sessions.GetMember(ctx, m.SessionID, m.Member); errors.Is(err, session.ErrNotFound) {
			k.log.Info("composite ended with its member: forgotten", "id", m.ID, "session", m.SessionID)
			return k.cat.RemoveMediaService(ctx, m.Kind, m.ID, k.self) == nil
		}
	}
	err := k.cat.OrphanMediaService(ctx, m)
	if err == nil {
		k.log.Warn("media service stopped here unasked: let go for the session's owner", "kind", m.Kind, "id", m.ID,
			"session", m.SessionID)
	}
	return err == nil || errors.Is(err, catalog.ErrMoved)
}

// adopt starts here the kept services of the session l is this node's
// owner lease of whose node is gone: nobody (its node restarted) or one
// for which gone says it died. It returns how many it started; the first
// error is returned after the others were tried.
func (k *keeper) adopt(ctx context.Context, l catalog.Lease, gone func(node string) bool) (int, error) {
	rows, err := k.cat.MediaServices(ctx, l.SessionID)
	if err != nil {
		return 0, err
	}
	n := 0
	var first error
	for _, m := range rows {
		if m.Node == k.self || (m.Node != "" && !gone(m.Node)) {
			continue
		}
		switch err := k.restart(ctx, l, m); {
		case err == nil:
			n++
		case errors.Is(err, catalog.ErrMoved): // another node was quicker, or it was stopped
		case first == nil:
			first = fmt.Errorf("start %s %s again: %w", m.Kind, m.ID, err)
		}
	}
	return n, first
}

// hlsMoved is the data of hls.moved: the stream as it is now, the node
// that serves it (and where clients reach that node, if it knows) and the
// one it came from ("" when that node had restarted and let it go).
type hlsMoved struct {
	hls.Info
	Node    string `json:"node"`
	NodeURL string `json:"node_url,omitempty"`
	From    string `json:"from,omitempty"`
}

// compositeMoved is the data of composite.moved: the composite as it is
// now (its new track and member), its node and the one it came from.
type compositeMoved struct {
	composite.Info
	Node string `json:"node"`
	From string `json:"from,omitempty"`
}

// restart starts one service here with its request, then moves its row
// here (fenced by l, only if it still names m.Node); if the move is
// refused it stops what it started. Once moved, the member that published
// its picture on the dead node leaves the session.
func (k *keeper) restart(ctx context.Context, l catalog.Lease, m catalog.MediaService) error {
	var (
		member  string
		undo    func()
		moved   any
		typ     event.Type
		started = time.Now()
	)
	switch m.Kind {
	case catalog.ServiceHLS:
		var so hls.StartOptions
		if err := json.Unmarshal([]byte(m.Request), &so); err != nil {
			return fmt.Errorf("its request %q: %w", m.Request, err)
		}
		info, fresh, err := k.hls.Resume(m.SessionID, so)
		if err != nil {
			return err
		}
		if fresh {
			undo = func() { _ = k.hls.Drop(m.SessionID) }
		}
		member, typ = k.pins.get(m.SessionID), event.HLSMoved
		mv := hlsMoved{Info: info, Node: k.self, From: m.Node}
		if u := k.url(); u != "" {
			mv.NodeURL = u
		}
		moved = mv
	case catalog.ServiceComposite:
		var req composite.Request
		if err := json.Unmarshal([]byte(m.Request), &req); err != nil {
			return fmt.Errorf("its request %q: %w", m.Request, err)
		}
		info, err := k.composites.Resume(m.SessionID, m.ID, req)
		switch {
		case errors.Is(err, composite.ErrExists):
			var ok bool
			if info, ok = k.composites.Get(m.SessionID, m.ID); !ok {
				return err
			}
		case err != nil:
			return err
		default:
			undo = func() { _ = k.composites.Stop(m.SessionID, m.ID) }
		}
		member, typ = info.Member, event.CompositeMoved
		moved = compositeMoved{Info: info, Node: k.self, From: m.Node}
	default:
		return fmt.Errorf("unknown kind %q", m.Kind)
	}
	k.mu.Lock()
	err := k.cat.MoveMediaService(ctx, l, time.Now(), m, k.self, member)
	if err == nil {
		k.mine[serviceKey{m.Kind, m.ID}] = true
	}
	k.mu.Unlock()
	if err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	if m.Member != "" && m.Member != member {
		if err := k.sessions.Leave(ctx, m.SessionID, m.Member); err != nil && !errors.Is(err, session.ErrNotFound) {
			k.log.Warn("the dead node's member of a media service stays", "session", m.SessionID, "member", m.Member, "err", err)
		}
	}
	k.sessions.Announce(m.SessionID, typ, moved)
	k.log.Warn("media service started here again", "kind", m.Kind, "id", m.ID, "session", m.SessionID,
		"from", m.Node, "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// streamURL is where clients reach the node running a session's kept
// HLS stream, if that is another node alive ("" otherwise): the API
// passes viewers' requests for a stream it does not run there
// (api.Options.HLSElsewhere).
func (k *keeper) streamURL(session string) string {
	now := time.Now()
	k.elsewhereMu.Lock()
	at, ok := k.elsewhere[session]
	k.elsewhereMu.Unlock()
	if ok && now.Before(at.until) {
		return at.url
	}
	at = streamAt{until: now.Add(elsewhereTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	rows, err := k.cat.MediaServices(ctx, session)
	if err != nil {
		return ""
	}
	for _, m := range rows {
		if m.Kind == catalog.ServiceHLS && m.Node != "" && m.Node != k.self {
			at.url = k.urlOf(m.Node)
		}
	}
	k.elsewhereMu.Lock()
	if len(k.elsewhere) > 1000 { // sessions that asked once: not kept for good
		k.elsewhere = map[string]streamAt{}
	}
	k.elsewhere[session] = at
	k.elsewhereMu.Unlock()
	return at.url
}
