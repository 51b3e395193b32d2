package node

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/sip"
)

// phoneCalls keeps the calls phones made into sessions in the catalog
// (catalog.SIPCall: the member, the serving node, the SIP dialog), so that
// when the node that answered one dies, the session's owner takes it over
// (issue 16): failover moves the call to itself (fenced by its lease, so
// exactly one survivor does), sets the phone's member up again on its own
// media — links made anew, with what only the SIP gateway gives them
// (latching, the composite, SendPT), not as the session re-homed them —
// and re-INVITEs the phone in the same dialog (sip.Server.Resume). A phone
// that does not take the re-INVITE has hung up: its member leaves.
//
//	kill -9 A ─▶ failover on owner B ─▶ takeOver: MoveSIPCall(A → B) ─▶ resume: links anew, re-INVITE ─▶ phone sends to B
//
// A cluster only; a lone node keeps nothing (its calls end with it).
type phoneCalls struct {
	self  string
	cat   *catalog.Store
	confs conferences // whose calls is this
	srv   *sip.Server // set once SIP runs
	log   *slog.Logger

	mu   sync.Mutex
	mine map[string]bool // the calls this node kept, by Call-ID
}

// resumeWithin bounds setting a phone up again and its re-INVITE.
const resumeWithin = 30 * time.Second

// keep stores (or stores again) a call this node serves.
func (p *phoneCalls) keep(sessionID, member string, d sip.Dialog) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.cat.PutSIPCall(ctx, catalog.SIPCall{CallID: d.CallID, SessionID: sessionID, Member: member, Node: p.self,
		Dialog: d.Marshal()})
	if err != nil {
		p.log.Warn("sip call not kept: no other node can take it over", "session", sessionID, "member", member, "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mine == nil {
		p.mine = map[string]bool{}
	}
	p.mine[d.CallID] = true
}

// forget drops a call that ended.
func (p *phoneCalls) forget(callID string) {
	p.mu.Lock()
	delete(p.mine, callID)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.cat.DeleteSIPCall(ctx, callID); err != nil {
		p.log.Warn("ended sip call not forgotten", "call", callID, "err", err)
	}
}

// takeOver moves to this node the calls of session l.SessionID (whose
// lease l this node holds) that a gone node served, and resumes each on
// its own goroutine.
func (p *phoneCalls) takeOver(ctx context.Context, l catalog.Lease, gone func(node string) bool) {
	if p == nil || p.srv == nil {
		return
	}
	calls, err := p.cat.SIPCalls(ctx, l.SessionID)
	if err != nil {
		p.log.Warn("failover: the session's sip calls", "session", l.SessionID, "err", err)
		return
	}
	for _, c := range calls {
		if c.Node == p.self || !gone(c.Node) {
			continue
		}
		d, err := sip.ParseDialog(c.Dialog)
		if err != nil || d.Session != c.SessionID {
			p.log.Warn("failover: a sip call that cannot be taken over", "session", c.SessionID, "call", c.CallID, "err", err)
			p.forget(c.CallID)
			continue
		}
		if err := p.cat.MoveSIPCall(ctx, l, time.Now(), c.CallID, c.Node, p.self); err != nil {
			if !errors.Is(err, catalog.ErrMoved) {
				p.log.Warn("failover: take a sip call over", "session", c.SessionID, "call", c.CallID, "err", err)
			}
			continue
		}
		go p.resume(c, d)
	}
}

// resume sets the phone of call c up again on this node and re-INVITEs it.
func (p *phoneCalls) resume(c catalog.SIPCall, d sip.Dialog) {
	ctx, cancel := context.WithTimeout(context.Background(), resumeWithin)
	defer cancel()
	start := time.Now()
	m, err := p.confs.sessions.GetMember(ctx, c.SessionID, c.Member)
	if err != nil { // it left meanwhile (removed by a chair)
		p.log.Info("failover: the phone's member has left", "session", c.SessionID, "call", c.CallID, "err", err)
		p.forget(c.CallID)
		return
	}
	caller, err := sip.CallerOf(d)
	if err != nil {
		p.log.Warn("failover: the phone's offer", "session", c.SessionID, "call", c.CallID, "err", err)
		p.forget(c.CallID)
		return
	}
	err = p.srv.Resume(ctx, d, func(say func(string) error) (netip.AddrPort, sip.ConferenceCall, error) {
		p.dropLinks(ctx, c.SessionID, m.ID)
		caller.Say = say
		return p.confs.connect(ctx, caller, m.ID, m.Name)
	})
	if err != nil {
		p.log.Warn("failover: sip call not taken over; the phone's member left", "session", c.SessionID, "call", c.CallID, "err", err)
		p.forget(c.CallID)
		return
	}
	p.log.Info("failover: sip call taken over", "session", c.SessionID, "call", c.CallID, "member", m.ID,
		"took", time.Since(start).Round(time.Millisecond))
}

// dropLinks removes the links of the phone's member that the session
// re-homed here without what the SIP gateway gives them.
func (p *phoneCalls) dropLinks(ctx context.Context, sessionID, member string) {
	s, err := p.confs.sessions.Get(ctx, sessionID)
	if err != nil {
		return
	}
	for _, l := range s.Links {
		if l.Member == member && l.Type == session.LinkRTP {
			_ = p.confs.sessions.RemoveLink(ctx, sessionID, session.LinkRTP, l.ID)
		}
	}
}

// fence lets go of the calls this node kept that the catalog says another
// node serves now (it took them over while this one was cut off and
// taken for dead): their requests are no longer answered here, their chat
// agent and composite are let go, their members stay (sip.Server.LetGo).
// After every lease round, like session.Service.DropMovedLinks.
func (p *phoneCalls) fence(ctx context.Context) {
	if p == nil || p.srv == nil {
		return
	}
	p.mu.Lock()
	before := make([]string, 0, len(p.mine)) // stored before the query: one kept after it is not in its answer
	for id := range p.mine {
		before = append(before, id)
	}
	p.mu.Unlock()
	if len(before) == 0 {
		return
	}
	ids, err := p.cat.NodeSIPCalls(ctx, p.self)
	if err != nil {
		return // the catalog cannot tell
	}
	still := make(map[string]bool, len(ids))
	for _, id := range ids {
		still[id] = true
	}
	var moved []string
	p.mu.Lock()
	for _, id := range before {
		if !still[id] && p.mine[id] {
			moved = append(moved, id)
			delete(p.mine, id)
		}
	}
	p.mu.Unlock()
	for _, id := range moved {
		if p.srv.LetGo(id) {
			p.log.Warn("sip call served by another node now: let go here", "call", id)
		}
	}
}
