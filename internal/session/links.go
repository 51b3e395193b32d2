package session

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/multicast"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/udpmux"
)

func parseKindDir(kind, dir string) (media.Kind, media.Direction, error) {
	k, ok := media.ParseKind(kind)
	if !ok {
		return 0, "", fmt.Errorf("%w: kind must be \"audio\" or \"video\", not %q", ErrInvalid, kind)
	}
	if dir == "" {
		dir = string(media.SendRecv)
	}
	d := media.Direction(dir)
	if !d.Valid() {
		return 0, "", fmt.Errorf("%w: direction must be sendrecv, sendonly or recvonly, not %q", ErrInvalid, dir)
	}
	return k, d, nil
}

func parseAddr(field, s string) (netip.AddrPort, error) {
	a, err := netip.ParseAddrPort(s)
	if err != nil || a.Port() == 0 || a.Addr().IsUnspecified() {
		return netip.AddrPort{}, fmt.Errorf("%w: %s must be an IP address and a non-zero port such as 127.0.0.1:5004, not %q", ErrInvalid, field, s)
	}
	return a, nil
}

// rtpRecord checks a request and turns it into a catalog record.
func rtpRecord(req NewRTPLink) (catalog.Link, error) {
	if _, _, err := parseKindDir(req.Kind, req.Direction); err != nil {
		return catalog.Link{}, err
	}
	if _, err := parseAddr("remote", req.Remote); err != nil {
		return catalog.Link{}, err
	}
	if req.RemoteRTCP != "" {
		if _, err := parseAddr("remote_rtcp", req.RemoteRTCP); err != nil {
			return catalog.Link{}, err
		}
	}
	dir := req.Direction
	if dir == "" {
		dir = string(media.SendRecv)
	}
	if _, err := parseLinkCodec(req.Kind, req.Codec); err != nil {
		return catalog.Link{}, err
	}
	if req.Mix != "" {
		if req.Kind != "audio" {
			return catalog.Link{}, fmt.Errorf("%w: only an audio link hears a mix", ErrInvalid)
		}
		if _, _, err := parseMix(req.Mix); err != nil {
			return catalog.Link{}, err
		}
	}
	return catalog.Link{ID: newID("l_"), Type: LinkRTP, Kind: req.Kind, Direction: dir, Remote: req.Remote,
		RemoteRTCP: req.RemoteRTCP, RTCPMux: req.RTCPMux, Mix: req.Mix, Codec: req.Codec}, nil
}

func multicastRecord(req NewMulticastLink) (catalog.Link, error) {
	if _, _, err := parseKindDir(req.Kind, req.Direction); err != nil {
		return catalog.Link{}, err
	}
	g, err := netip.ParseAddrPort(req.Group)
	if err != nil || !g.Addr().Is4() || !g.Addr().IsMulticast() || g.Port() == 0 {
		return catalog.Link{}, fmt.Errorf("%w: group must be an IPv4 multicast address and port such as 239.1.2.3:5004, not %q", ErrInvalid, req.Group)
	}
	if req.TTL < 0 || req.TTL > 255 {
		return catalog.Link{}, fmt.Errorf("%w: ttl must be 0..255", ErrInvalid)
	}
	if _, err := parseLinkCodec(req.Kind, req.Codec); err != nil {
		return catalog.Link{}, err
	}
	dir := req.Direction
	if dir == "" {
		dir = string(media.SendRecv)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = 1
	}
	return catalog.Link{ID: newID("l_"), Type: LinkMulticast, Kind: req.Kind, Direction: dir, Remote: req.Group,
		TTL: ttl, Interface: req.Interface, Codec: req.Codec}, nil
}

// mediaPlace is where a link's media goes in its room: the member it
// belongs to, the member's subgroup, and whether its track starts gated by
// floor control.
type mediaPlace struct {
	member  string
	group   string
	gated   bool
	policed bool             // created by a member: consent before sending (LinkPolicy)
	latch   []netip.Addr     // IPs the endpoint may be learnt at (NewRTPLink.Latch)
	latchPT func(uint8) bool // NewRTPLink.LatchPT
	from    string           // NewRTPLink.From
	sendPT  uint8            // NewRTPLink.SendPT
}

// linkExtras are what a link request carries that the catalog does not
// keep: the gateway's latching IPs, whose tracks alone the endpoint hears,
// the payload type it takes.
type linkExtras struct {
	latch   []netip.Addr
	latchPT func(uint8) bool
	from    string
	sendPT  uint8
}

// opener starts the media of one type of link record in a room.
type opener func(s *Service, rec catalog.Link, room *broker.Room, at mediaPlace) (Media, error)

// openers are the link types the session knows; a new kind of link (WebRTC,
// mixer, recorder) adds its opener here and nothing else in the session.
func openers() map[string]opener {
	return map[string]opener{LinkRTP: openRTP, LinkMulticast: openMulticast}
}

// open starts the media of a link record in a room.
func (s *Service) open(rec catalog.Link, room *broker.Room, at mediaPlace) (Media, error) {
	o, ok := s.openers[rec.Type]
	if !ok {
		return nil, fmt.Errorf("%w: unknown link type %q", ErrInvalid, rec.Type)
	}
	return o(s, rec, room, at)
}

func openRTP(s *Service, rec catalog.Link, room *broker.Room, at mediaPlace) (Media, error) {
	kind, dir, err := parseKindDir(rec.Kind, rec.Direction)
	if err != nil {
		return nil, err
	}
	remote, err := parseAddr("remote", rec.Remote)
	if err != nil {
		return nil, err
	}
	var spec codec.Spec
	var te uint8
	mixed := rec.Mix != "" && dir.Receives()
	if mixed {
		if spec, te, err = parseMix(rec.Mix); err != nil {
			return nil, err
		}
		if s.o.Mixers == nil {
			return nil, fmt.Errorf("%w: this node mixes no audio", ErrUnavailable)
		}
	}
	info, err := parseLinkCodec(rec.Kind, rec.Codec)
	if err != nil {
		return nil, err
	}
	if rec.Codec == "" && rec.Mix != "" {
		// An endpoint that hears the mix sends in the mix's codec (a phone
		// answers with one codec both ways).
		info.Info = mixInfo(spec)
	}
	cfg := rtplink.Config{ID: rec.ID, Kind: kind, Direction: dir, Remote: remote, RTCPMux: rec.RTCPMux, Queue: s.o.Queue, Info: info.Info,
		Group: at.group, Gated: at.gated, Owner: at.member, Mixed: mixed, Metrics: s.o.LinkMetrics}
	if te != 0 && at.member != "" && s.o.OnDigit != nil {
		sid, member := rec.SessionID, at.member
		cfg.TelephoneEvent = te
		cfg.OnDigit = func(d byte) { s.o.OnDigit(sid, member, d) }
	}
	if rec.RemoteRTCP != "" {
		if cfg.RemoteRTCP, err = parseAddr("remote_rtcp", rec.RemoteRTCP); err != nil {
			return nil, err
		}
	}
	if at.policed {
		cfg.Consent = s.o.Links.consentTimeout()
	}
	cfg.Latch, cfg.LatchPT, cfg.LatchWindow = at.latch, at.latchPT, s.o.Links.latchWindow()
	// A link that hears one member's tracks (a video phone: a composite,
	// or the speaker it follows) takes them as one stream, across changes
	// of that member (broker.Room.SetFrom).
	cfg.From, cfg.SendPT, cfg.OneStream = at.from, at.sendPT, at.from != ""
	var rc *recoder
	if kind == media.Video && dir.Receives() && s.o.Video != nil && info.Info.Codec != "" {
		// A receiver that names its codec gets other codecs' cameras
		// transcoded (recode.go).
		rc = &recoder{vt: s.o.Video, room: room, link: rec.ID, codec: info.Info.Codec, log: s.log,
			subs: map[*broker.Track]*recodeSub{}}
		cfg.Receive, cfg.OnChange = rc, rc.sync
	}
	l, err := rtplink.Open(cfg, s.o.Sockets, room)
	if err != nil {
		if errors.Is(err, udpmux.ErrAddrInUse) {
			return nil, fmt.Errorf("%w: another link already uses remote address %s", ErrConflict, rec.Remote)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	m := rtpMedia{l: l, socks: s.o.Sockets, member: at.member, rc: rc}
	if rc != nil {
		rc.open(l, cfg.OneStream)
	}
	if !mixed {
		return m, nil
	}
	mm := &mixedMedia{rtpMedia: m, svc: s.o.Mixers, session: rec.SessionID, room: room,
		out: &mixer.Output{ID: rec.ID, Owner: at.member, Codec: spec, Sink: l}}
	if err := mm.SetGroup(at.group); err != nil {
		l.Close()
		return nil, err
	}
	return mm, nil
}

func openMulticast(s *Service, rec catalog.Link, room *broker.Room, at mediaPlace) (Media, error) {
	kind, dir, err := parseKindDir(rec.Kind, rec.Direction)
	if err != nil {
		return nil, err
	}
	g, err := netip.ParseAddrPort(rec.Remote)
	if err != nil {
		return nil, fmt.Errorf("%w: group %q", ErrInvalid, rec.Remote)
	}
	info, err := parseLinkCodec(rec.Kind, rec.Codec)
	if err != nil {
		return nil, err
	}
	b, err := multicast.Open(multicast.Config{ID: rec.ID, Kind: kind, Group: g, Interface: rec.Interface, Info: info.Info,
		TTL: rec.TTL, Direction: dir, Queue: s.o.Queue, Logger: s.log,
		Subgroup: at.group, Gated: at.gated, Owner: at.member}, room)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return mcastMedia{b: b, member: at.member}, nil
}

// AddRTPLink attaches a plain RTP endpoint to an active session. A link
// for a member takes the member's role (a listener's link only receives),
// subgroup and floor gate.
//
// A policed link (req.Policed: a member created it) must also pass the
// destination policy (Options.Links), counts against the caps, and gets
// nothing until its remote has sent from that address (consent).
func (s *Service) AddRTPLink(ctx context.Context, sessionID string, req NewRTPLink) (Link, error) {
	rec, err := rtpRecord(req)
	if err != nil {
		return Link{}, err
	}
	if err := s.checkRTPDestinations(req); err != nil {
		s.refusedLinks.Add(1)
		return Link{}, err
	}
	var latch []netip.Addr
	for _, ip := range req.Latch {
		if s.checkDestination("latch", netip.AddrPortFrom(ip, 0), req.Policed) == nil {
			latch = append(latch, ip)
		}
	}
	return s.addLink(ctx, sessionID, rec, req.Member, req.Policed, linkExtras{latch: latch, latchPT: req.LatchPT, from: req.From, sendPT: req.SendPT})
}

// attach opens a link's media for member (or none), registering its track
// with the session's floor gates; mu is held, c may be nil.
func (s *Service) attach(c *control, rec catalog.Link, member string, policed bool, x linkExtras, room *broker.Room) (*liveLink, error) {
	at := mediaPlace{member: member, policed: policed, latch: x.latch, latchPT: x.latchPT, from: x.from, sendPT: x.sendPT}
	if c != nil {
		if m, ok := c.members[member]; ok {
			at.group = m.Subgroup
		}
		at.gated = !c.floors.Holds(member, rec.Kind)
	}
	m, err := s.open(rec, room, at)
	if err != nil {
		return nil, err
	}
	l := &liveLink{rec: rec, media: m, member: member, policed: policed}
	if c != nil {
		kind, _ := media.ParseKind(rec.Kind)
		c.gates.add(rec.ID, m.Member(), kind, m.Track())
	}
	return l, nil
}

// AddMulticastLink bridges an active session to a multicast group. With a
// member, the group is that member's link like any other: its role,
// subgroup and floor gate, and no echo of the member's own media. Without
// one, the group belongs to no member: it is in the main session and,
// under an enforced floor, never holds it.
func (s *Service) AddMulticastLink(ctx context.Context, sessionID string, req NewMulticastLink) (Link, error) {
	rec, err := multicastRecord(req)
	if err != nil {
		return Link{}, err
	}
	return s.addLink(ctx, sessionID, rec, req.Member, false, linkExtras{})
}

func (s *Service) addLink(ctx context.Context, sessionID string, rec catalog.Link, member string, policed bool, x linkExtras) (Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return Link{}, ErrDraining
	}
	// A lone node's live sessions are exactly its activated ones (every
	// change goes through it), so a join to one reads nothing; in a
	// cluster another node may have changed the session.
	ls := s.live[sessionID]
	if ls == nil || s.o.Node != "" {
		sess, err := s.o.Catalog.GetSession(ctx, sessionID)
		if err != nil {
			return Link{}, wrapCatalog(err)
		}
		if ls == nil && s.o.Node != "" && sess.State == StateActivated {
			if err := s.participate(ctx, sessionID); err != nil { // another node owns it
				return Link{}, err
			}
		}
		if ls = s.live[sessionID]; ls == nil {
			return Link{}, fmt.Errorf("%w: session is %s, not %s", ErrConflict, sess.State, StateActivated)
		}
	}
	rec.SessionID = sessionID
	rec.CreatedAt = s.o.Now().UTC()
	c := s.ctl[sessionID]
	if member != "" {
		mem, ok := s.member(ctx, c, sessionID, member)
		if !ok {
			return Link{}, fmt.Errorf("%w: session %s has no member %q", ErrInvalid, sessionID, member)
		}
		if mem.Role == floor.RoleListener {
			rec.Direction = string(media.RecvOnly) // a listener never publishes
		}
	}
	if policed && member == "" {
		return Link{}, fmt.Errorf("%w: a member's link needs its member", ErrInvalid)
	}
	if err := s.checkCaps(ls, member, policed); err != nil {
		s.refusedLinks.Add(1)
		return Link{}, err
	}
	if err := s.admitLink(ls, rec, member); err != nil {
		return Link{}, err
	}
	l, err := s.attach(c, rec, member, policed, x, ls.room)
	if err != nil {
		return Link{}, err
	}
	err = s.o.Catalog.AddLink(ctx, rec)
	if err == nil && member != "" {
		err = s.o.Catalog.SetLinkMember(ctx, rec.ID, member)
	}
	if err == nil && policed {
		err = s.o.Catalog.SetLinkPoliced(ctx, rec.ID)
	}
	if err == nil && s.o.Node != "" {
		err = s.o.Catalog.SetLinkNode(ctx, rec.ID, s.o.Node)
	}
	if err != nil {
		_ = s.o.Catalog.RemoveLink(ctx, rec.ID)
	}
	if err != nil {
		l.media.Close()
		if c != nil {
			c.gates.remove(rec.ID)
		}
		return Link{}, wrapCatalog(err)
	}
	ls.links[rec.ID] = l
	v := linkView(l)
	s.publish(sessionID, event.LinkAdded, v)
	s.log.Info("link added", "session", sessionID, "link", rec.ID, "type", rec.Type, "remote", rec.Remote, "kind", rec.Kind, "direction", rec.Direction)
	return v, nil
}

// RemoveLink detaches a link of the given type from a session.
func (s *Service) RemoveLink(ctx context.Context, sessionID, typ, linkID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.o.Catalog.GetLink(ctx, linkID)
	if err != nil || rec.SessionID != sessionID || rec.Type != typ {
		return fmt.Errorf("%w: session %s has no %s link %s", ErrNotFound, sessionID, typ, linkID)
	}
	if err := s.o.Catalog.RemoveLink(ctx, linkID); err != nil {
		return wrapCatalog(err)
	}
	if ls := s.live[sessionID]; ls != nil {
		if l := ls.links[linkID]; l != nil {
			s.closeLink(l)
			delete(ls.links, linkID)
		}
	}
	if c := s.ctl[sessionID]; c != nil {
		c.gates.remove(linkID)
	}
	s.publish(sessionID, event.LinkRemoved, map[string]string{"id": linkID})
	s.log.Info("link removed", "session", sessionID, "link", linkID)
	return nil
}

// Drain refuses new sessions and links, then stops the media of every live
// session. The catalog is not changed: sessions that were active are active
// again when the node restarts.
func (s *Service) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	for id := range s.timers {
		s.disarm(id)
	}
	for id := range s.ctl {
		s.dropControl(id)
	}
	for id, ls := range s.live {
		for _, l := range ls.links {
			s.closeLink(l)
		}
		s.o.Broker.Remove(id)
	}
	s.live = map[string]*liveSession{}
	s.releaseAll()
}

// Load are the figures of a node's media.
type Load struct {
	Sessions, Links, Tracks int
	PacketsIn, PacketsOut   uint64
	BytesIn, BytesOut       uint64
	Dropped                 map[string]uint64
	// Quality is every live link's that has one (plain RTP links whose
	// endpoint sent a receiver report), by link ID.
	Quality map[string]rtplink.Quality
}

// Load sums the counters of every link this node has run.
func (s *Service) Load() Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.retired
	ld := Load{Sessions: len(s.live), Dropped: map[string]uint64{},
		PacketsIn: r.PacketsIn, BytesIn: r.BytesIn, PacketsOut: r.PacketsOut, BytesOut: r.BytesOut}
	for k, v := range r.Dropped {
		ld.Dropped[k] = v
	}
	for _, ls := range s.live {
		ld.Tracks += len(ls.room.Tracks())
		for _, l := range ls.links {
			ld.Links++
			st := mediaStats(l.media)
			ld.PacketsIn += st.PacketsIn
			ld.BytesIn += st.BytesIn
			ld.PacketsOut += st.PacketsOut
			ld.BytesOut += st.BytesOut
			for k, v := range st.Dropped {
				ld.Dropped[k] += v
			}
			if st.Quality != nil {
				if ld.Quality == nil {
					ld.Quality = map[string]rtplink.Quality{}
				}
				ld.Quality[l.rec.ID] = *st.Quality
			}
		}
	}
	return ld
}

// counter is what a Media may offer besides Stats: the counts Counts
// sums, without Stats' maps.
type counter interface {
	Counts() (in, out, queueFull uint64)
}

// Counts returns Load's PacketsIn, PacketsOut and Dropped["queue_full"]
// (the capacity governor's load, twice a second) at less cost: links
// that count for themselves are asked for the three numbers alone.
func (s *Service) Counts() (in, out, queueFull uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.retired
	in, out, queueFull = r.PacketsIn, r.PacketsOut, r.Dropped["queue_full"]
	for _, ls := range s.live {
		for _, l := range ls.links {
			if c, ok := l.media.(counter); ok {
				i, o, q := c.Counts()
				in, out, queueFull = in+i, out+o, queueFull+q
				continue
			}
			st := mediaStats(l.media)
			in, out, queueFull = in+st.PacketsIn, out+st.PacketsOut, queueFull+st.Dropped["queue_full"]
		}
	}
	return in, out, queueFull
}

func sortedLinks(m map[string]*liveLink) []*liveLink {
	out := make([]*liveLink, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].rec.CreatedAt.Equal(out[j].rec.CreatedAt) {
			return out[i].rec.CreatedAt.Before(out[j].rec.CreatedAt)
		}
		return out[i].rec.ID < out[j].rec.ID
	})
	return out
}

type rtpMedia struct {
	l      *rtplink.Link
	socks  rtplink.Sockets
	member string
	rc     *recoder // a video receiver's transcoders, or nil
}

func (m rtpMedia) Member() string       { return m.member }
func (m rtpMedia) Track() *broker.Track { return m.l.Track() }

func (m rtpMedia) Close() {
	m.l.Close()
	if m.rc != nil {
		m.rc.close()
	}
}

func (m rtpMedia) Local() Local {
	rtp := m.socks.RTP.LocalAddr()
	rtcp := m.socks.RTCP.LocalAddr()
	if m.l.Config().RTCPMux {
		rtcp = rtp
	}
	return Local{Addr: rtp.Addr().String(), RTPPort: int(rtp.Port()), RTCPPort: int(rtcp.Port())}
}

func (m rtpMedia) Counts() (in, out, queueFull uint64) { return m.l.Counts() }

func (m rtpMedia) Stats() LinkStats {
	st := m.l.Stats()
	ls := LinkStats{PacketsIn: st.PacketsIn, BytesIn: st.BytesIn, RTCPIn: st.RTCPIn,
		PacketsOut: st.Out.Packets, BytesOut: st.Out.Bytes, RTCPOut: st.RTCPOut.Packets,
		Dropped: withQueueDrops(st.Dropped, st.Out.Drops+st.RTCPOut.Drops)}
	if st.Quality.Reports > 0 {
		ls.Quality = &st.Quality
	}
	return ls
}

// DropFloor is the drop reason of media sent without holding the floor:
// received and counted in packets_in, never forwarded.
const DropFloor = "floor"

type mcastMedia struct {
	b      *multicast.Bridge
	member string
}

func (m mcastMedia) Member() string       { return m.member }
func (m mcastMedia) Track() *broker.Track { return m.b.Track() }
func (m mcastMedia) Close()               { m.b.Close() }

func (m mcastMedia) Local() Local {
	g := m.b.Config().Group
	return Local{Addr: g.Addr().String(), RTPPort: int(g.Port()), RTCPPort: int(g.Port()) + 1}
}

func (m mcastMedia) Stats() LinkStats {
	st := m.b.Stats()
	return LinkStats{PacketsIn: st.PacketsIn, BytesIn: st.BytesIn, PacketsOut: st.Out.Packets,
		BytesOut: st.Out.Bytes, Dropped: withQueueDrops(st.Dropped, st.Out.Drops)}
}

// mediaStats are a link's counters with its floor drops, whatever its kind.
func mediaStats(m Media) LinkStats {
	st := m.Stats()
	if t := m.Track(); t != nil {
		st.Dropped[DropFloor] = t.GateDrops()
	}
	return st
}

func withQueueDrops(m map[string]uint64, q uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	out["queue_full"] = q
	return out
}
