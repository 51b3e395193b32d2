package sip

import (
	"context"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Participant is one member of a session, as the RFC 4575 conference event
// package shows it to phones.
type Participant struct {
	ID, Name string
	Phone    bool // joined by dialling in
}

// Roster is the optional part of Conferences that phones subscribe to
// (SUBSCRIBE sip:<session>@domain, Event: conference).
type Roster interface {
	Participants(ctx context.Context, session string) ([]Participant, error)
}

// Subscriptions are capped, and refreshed within these bounds.
const (
	maxConfSubs    = 1000
	confSubExpires = 600 * time.Second
	confSubMin     = 60 * time.Second
	confPoll       = time.Second
)

// confSub is one phone's subscription to a session's roster.
type confSub struct {
	session  string
	callID   string
	ourTag   string
	to       sip.Uri // the subscriber's address of record (its From)
	theirTag string
	target   sip.Uri // its Contact
	tp, addr string
	cseq     uint32
	expires  time.Time
	version  int
	last     uint64 // hash of the roster last notified
}

type confSubs struct {
	mu      sync.Mutex
	subs    map[string]*confSub // by Call-ID
	running bool
	max     int // 0: maxConfSubs (tests lower it)
}

// subscribeConference takes an authenticated SUBSCRIBE to a session's
// conference events: 200, then a full NOTIFY, then one whenever the
// roster changes, until it expires or is ended (Expires: 0).
func (s *Server) subscribeConference(req *sip.Request, tx sip.ServerTransaction, session string) {
	r, ok := s.o.Conferences.(Roster)
	if !ok || !isConfEvent(req) {
		s.respond(tx, sip.NewResponseFromRequest(req, 489, "Bad Event", nil))
		return
	}
	expires := subExpires(req)
	c := req.Contact()
	if c == nil {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (no Contact)", nil))
		return
	}
	theirTag, _ := req.From().Params.Get("tag")
	sub := &confSub{session: session, callID: string(*req.CallID()), ourTag: sip.GenerateTagN(16), to: *req.From().Address.Clone(),
		theirTag: theirTag, target: *c.Address.Clone(), expires: s.o.Now().Add(expires)}
	sub.tp, sub.addr = strings.ToLower(req.Transport()), req.Source()
	s.csubs.mu.Lock()
	limit := s.csubs.max
	if limit == 0 {
		limit = maxConfSubs
	}
	if len(s.csubs.subs) >= limit {
		s.csubs.mu.Unlock()
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Service Unavailable (too many subscriptions)", nil))
		return
	}
	if s.csubs.subs == nil {
		s.csubs.subs = map[string]*confSub{}
	}
	s.csubs.subs[sub.callID] = sub
	start := !s.csubs.running
	s.csubs.running = true
	s.csubs.mu.Unlock()
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	res.To().Params.Add("tag", sub.ourTag)
	res.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(int(expires/time.Second))))
	res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", session, hostPort(s.o.Advertise, s.port))))
	s.respond(tx, res)
	if start {
		go s.watchRosters(r)
	}
	s.notifyRoster(r, sub, false)
}

func isConfEvent(req *sip.Request) bool {
	h := req.GetHeader("Event")
	if h == nil {
		return false
	}
	ev, _, _ := strings.Cut(h.Value(), ";")
	return strings.EqualFold(strings.TrimSpace(ev), "conference")
}

func subExpires(req *sip.Request) time.Duration {
	e := confSubExpires
	if h := req.GetHeader("Expires"); h != nil {
		if n, err := strconv.Atoi(strings.TrimSpace(h.Value())); err == nil && n >= 0 {
			e = min(confSubExpires, time.Duration(n)*time.Second)
			if e > 0 {
				e = max(confSubMin, e)
			}
		}
	}
	return e
}

// confSubInDialog refreshes or ends a subscription (a SUBSCRIBE inside its
// dialog); it reports whether the request was one.
func (s *Server) confSubInDialog(req *sip.Request, tx sip.ServerTransaction) bool {
	if req.Method != sip.SUBSCRIBE && req.Method != sip.NOTIFY {
		return false
	}
	callID := string(*req.CallID())
	s.csubs.mu.Lock()
	sub := s.csubs.subs[callID]
	s.csubs.mu.Unlock()
	if sub == nil || req.Method != sip.SUBSCRIBE {
		return false
	}
	r, _ := s.o.Conferences.(Roster)
	expires := subExpires(req)
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	res.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(int(expires/time.Second))))
	s.respond(tx, res)
	if expires == 0 {
		s.csubs.mu.Lock()
		delete(s.csubs.subs, callID)
		s.csubs.mu.Unlock()
		if r != nil {
			s.notifyRoster(r, sub, true)
		}
		return true
	}
	s.csubs.mu.Lock()
	sub.expires = s.o.Now().Add(expires)
	s.csubs.mu.Unlock()
	return true
}

// watchRosters notifies subscribers of changed rosters, once a second,
// and drops expired subscriptions; it ends with the server.
func (s *Server) watchRosters(r Roster) {
	t := time.NewTicker(confPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := s.o.Now()
		s.csubs.mu.Lock()
		var live []*confSub
		for id, sub := range s.csubs.subs {
			if now.After(sub.expires) {
				delete(s.csubs.subs, id)
				continue
			}
			live = append(live, sub)
		}
		s.csubs.mu.Unlock()
		for _, sub := range live {
			s.notifyRoster(r, sub, false)
		}
	}
}

// notifyRoster sends sub a full conference-info document if the roster
// changed since the last (or always when terminated).
func (s *Server) notifyRoster(r Roster, sub *confSub, terminated bool) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	ps, err := r.Participants(ctx, sub.session)
	if err != nil {
		ps, terminated = nil, true // the session is over
	}
	h := fnv.New64a()
	for _, p := range ps {
		fmt.Fprintf(h, "%s\x00%s\x00", p.ID, p.Name)
	}
	s.csubs.mu.Lock()
	if !terminated && sub.version > 0 && h.Sum64() == sub.last {
		s.csubs.mu.Unlock()
		return
	}
	sub.version++
	sub.last = h.Sum64()
	sub.cseq++
	version, cseq, left := sub.version, sub.cseq, time.Until(sub.expires)
	if terminated {
		delete(s.csubs.subs, sub.callID)
	}
	s.csubs.mu.Unlock()
	body := conferenceInfo(fmt.Sprintf("sip:%s@%s", sub.session, s.o.Domain), version, ps)
	req := sip.NewRequest(sip.NOTIFY, *sub.target.Clone())
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: sub.session, Host: s.o.Domain}}
	from.Params.Add("tag", sub.ourTag)
	req.AppendHeader(from)
	to := &sip.ToHeader{Address: *sub.to.Clone()}
	to.Params.Add("tag", sub.theirTag)
	req.AppendHeader(to)
	cid := sip.CallIDHeader(sub.callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq + 1, MethodName: sip.NOTIFY})
	req.AppendHeader(sip.NewHeader("Event", "conference"))
	state := fmt.Sprintf("active;expires=%d", max(0, int(left/time.Second)))
	if terminated {
		state = "terminated;reason=timeout"
		if err == nil {
			state = "terminated;reason=noresource"
		}
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	req.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", sub.session, hostPort(s.o.Advertise, s.port))))
	req.AppendHeader(sip.NewHeader("Content-Type", "application/conference-info+xml"))
	req.SetBody(body)
	s.route(req, sub.tp, sub.addr)
	if _, err := s.client.Do(ctx, req); err != nil {
		s.log.Debug("sip: conference NOTIFY", "session", sub.session, "err", err)
	}
}

// conferenceInfo is an RFC 4575 document in full state.
func conferenceInfo(entity string, version int, ps []Participant) []byte {
	type endpoint struct {
		Entity string `xml:"entity,attr"`
		Status string `xml:"status"`
	}
	type user struct {
		Entity   string   `xml:"entity,attr"`
		State    string   `xml:"state,attr"`
		Display  string   `xml:"display-text"`
		Endpoint endpoint `xml:"endpoint"`
	}
	type doc struct {
		XMLName xml.Name `xml:"urn:ietf:params:xml:ns:conference-info conference-info"`
		Entity  string   `xml:"entity,attr"`
		State   string   `xml:"state,attr"`
		Version int      `xml:"version,attr"`
		Count   int      `xml:"conference-state>user-count"`
		Users   []user   `xml:"users>user"`
	}
	d := doc{Entity: entity, State: "full", Version: version, Count: len(ps)}
	for _, p := range ps {
		kind := "browser"
		if p.Phone {
			kind = "phone"
		}
		d.Users = append(d.Users, user{Entity: "urn:convene:member:" + p.ID, State: "full", Display: p.Name,
			Endpoint: endpoint{Entity: "urn:convene:" + kind + ":" + p.ID, Status: "connected"}})
	}
	b, _ := xml.MarshalIndent(d, "", " ")
	return append([]byte(xml.Header), b...)
}
