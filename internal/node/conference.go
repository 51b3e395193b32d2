package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/sip"
	"github.com/convene/convene/internal/sipusers"
)

// conferences lets SIP phones dial into sessions: an INVITE to
// sip:<session id>@<domain> from an authenticated account joins the
// session as a participant whose phone hears the mix (package mixer) and
// speaks into the room through a policed plain RTP link.
type conferences struct {
	sessions *session.Service
	dtmf     *dtmf
	media    netip.AddrPort // the shared RTP socket's address
	chat     *chat.Service  // the phone takes part in the chat by SIP MESSAGE; nil: it does not
	phones   *phoneComposites
	calls    *phoneCalls // a cluster's: calls kept for another node to take over; nil: not kept
	// mixRoom names the SIP servers of the cluster's nodes with a mixer
	// free, nearest first (nil: not a cluster): a phone this node cannot
	// mix for is sent there.
	mixRoom func() []string
}

// phoneSuffix marks the name of a member who dialled in.
const phoneSuffix = " (phone)"

// IsConference reports whether user is the ID of an active session.
func (c conferences) IsConference(ctx context.Context, user string) bool {
	if !strings.HasPrefix(user, "s_") {
		return false
	}
	s, err := c.sessions.Get(ctx, user)
	return err == nil && s.State == session.StateActivated
}

// Join adds the caller as a participant with a mixed audio link.
func (c conferences) Join(ctx context.Context, caller sip.Caller) (netip.AddrPort, sip.ConferenceCall, error) {
	m, err := c.sessions.Join(ctx, caller.Session, caller.Display+phoneSuffix, "participant")
	if err != nil {
		return netip.AddrPort{}, sip.ConferenceCall{}, c.refusal(err)
	}
	return c.connect(ctx, caller, m.ID, m.Name)
}

// connect gives a phone's member (memberID, named name) its media: a
// mixed audio link, a video link if the phone offered video (phoneVideo),
// its digits and the session's chat; in a cluster the call is kept in the
// catalog for another node to take over (phoneCalls). If it cannot, the
// member leaves.
func (c conferences) connect(ctx context.Context, caller sip.Caller, memberID, name string) (netip.AddrPort, sip.ConferenceCall, error) {
	var none sip.ConferenceCall
	sessionID := caller.Session
	var kept atomic.Pointer[string] // the call's ID, once kept
	var holds []func()              // what the node holds for the call: the video's composite, the chat agent
	drop := func() {
		for _, h := range holds {
			h()
		}
	}
	leave := func() {
		drop()
		_ = c.sessions.Leave(context.Background(), sessionID, memberID)
		if id := kept.Load(); id != nil {
			c.calls.forget(*id)
		}
	}
	mix := caller.Codec
	if te := caller.TelephoneEvent; te >= 96 && te <= 127 {
		mix += ";telephone-event=" + strconv.Itoa(te)
	}
	// Behind NAT the phone's media comes from its signalling IP, not from
	// the address its SDP names: the link may latch onto either.
	var latch []netip.Addr
	for _, ip := range []netip.Addr{caller.Signal, caller.Media.Addr()} {
		if ip.IsValid() {
			latch = append(latch, ip)
		}
	}
	// A phone with video latches its audio and video on one IP (its NAT
	// maps them to two ports): each link learns the source of its own
	// payload types.
	var audioPT func(uint8) bool
	if v := caller.Video; v != nil {
		videoPT := v.PT
		audioPT = func(pt uint8) bool { return pt != videoPT }
	}
	l, err := c.sessions.AddRTPLink(ctx, sessionID, session.NewRTPLink{Remote: caller.Media.String(), Kind: "audio",
		Member: memberID, Mix: mix, Policed: true, Latch: latch, LatchPT: audioPT})
	if err != nil {
		leave()
		return netip.AddrPort{}, none, c.refusal(err)
	}
	addr, err := netip.ParseAddr(l.Local.Addr)
	if err != nil {
		leave()
		return netip.AddrPort{}, none, fmt.Errorf("the node's media address %q: %w", l.Local.Addr, err)
	}
	call := sip.ConferenceCall{Leave: leave, Drop: drop, Digit: func(d byte) { c.dtmf.digit(sessionID, memberID, d) }}
	if c.calls != nil {
		call.Keep = func(d sip.Dialog) {
			kept.Store(&d.CallID)
			c.calls.keep(sessionID, memberID, d)
		}
	}
	if caller.Video != nil {
		var release func()
		call.Video, call.VideoDirection, release = c.phoneVideo(ctx, sessionID, memberID, *caller.Video, caller.Signal)
		if release != nil {
			holds = append(holds, release)
		}
	}
	if c.chat != nil && caller.Say != nil {
		// The node orders the chat for the phone and sends it each line,
		// in order, as a MESSAGE (one at a time: the next waits for the
		// phone's answer); the phone's MESSAGEs are said in its name.
		ag, err := c.chat.AttachAgent(ctx, sessionID, memberID, name, func(from, text string) {
			if from != "" {
				text = from + ": " + text
			}
			_ = caller.Say(text)
		})
		if err != nil {
			leave()
			return netip.AddrPort{}, none, err
		}
		call.Text = ag.Say
		holds = append(holds, ag.Close)
	}
	return netip.AddrPortFrom(addr, uint16(l.Local.RTPPort)), call, nil
}

// phoneVideo gives a phone's video stream a policed plain RTP video link
// of its member: the phone's camera goes into the session (its codec
// named, so browsers, recordings and transcoders know it), and the phone
// receives the session's composite — one that runs, else one started for
// the session's phones (phoneComposites), in the phone's codec and
// payload type (another codec's composite reaches it through a video
// transcoder, as for any receiving link that names its codec). With no
// composite (composite.max, composite.cores, the governor, no ffmpeg) the
// link receives the active speaker's camera instead (else the first
// camera; not the phone's own), following the speaker
// (phoneComposites.follow) as one stream (the link is a
// broker.Member.OneStream receiver: one SSRC, numbers that run on, each
// new camera from its keyframe), through a video transcoder when the
// camera's codec is not the phone's. A link the session refuses (its caps, the
// destination policy) refuses the video stream (port 0), not the call.
// A composite the phone receives that stops (its starter stopped it, or
// it failed for good) is replaced within about a second
// (phoneComposites.watch): by another that runs, else one started for the
// phones, else the phone follows the speaker. release, if not nil, gives
// back what the link holds (a composite, or the following) when the
// phone leaves. Behind NAT the link latches onto the source of the
// phone's video payload type, the audio link onto the others'
// (rtplink.Config.LatchPT); the video's RTCP is not latched.
func (c conferences) phoneVideo(ctx context.Context, sessionID, member string, v sip.VideoOffer, signal netip.Addr) (netip.AddrPort, string, func()) {
	req := session.NewRTPLink{Remote: v.Media.String(), Kind: "video", Direction: "sendrecv", Codec: v.Codec,
		Member: member, Policed: true, SendPT: v.PT}
	// Behind NAT the phone's video comes from its signalling IP too: the
	// link latches onto the source of its payload type (the audio link
	// onto the others').
	for _, ip := range []netip.Addr{signal, v.Media.Addr()} {
		if ip.IsValid() {
			req.Latch = append(req.Latch, ip)
		}
	}
	videoPT := v.PT
	req.LatchPT = func(pt uint8) bool { return pt == videoPT }
	from, release := c.phones.acquire(sessionID, v.Codec)
	speaker := from == "" && c.phones != nil
	req.From = from
	if speaker {
		req.From = noOwner // nobody's, until follow chooses a camera
	} else if from == "" {
		req.Direction = "sendonly"
	}
	l, err := c.sessions.AddRTPLink(ctx, sessionID, req)
	if err == nil {
		var addr netip.Addr
		if addr, err = netip.ParseAddr(l.Local.Addr); err == nil {
			if speaker {
				release = c.phones.follow(sessionID, l.ID, member)
			} else if from != "" {
				release = c.phones.watch(sessionID, l.ID, member, v.Codec, from, release)
			}
			dir := "sendrecv"
			if req.Direction == "sendonly" {
				dir = "recvonly"
			}
			return netip.AddrPortFrom(addr, uint16(l.Local.RTPPort)), dir, release
		}
	}
	if release != nil {
		release()
	}
	return netip.AddrPort{}, "", nil
}

// noOwner is an owner no track has: a link whose From it is hears nothing.
const noOwner = "-"

// phoneComposites are the composites the node started for video phones,
// one a session, shared by its phones and stopped when the last leaves;
// and, where no composite could be had, the phones' links that follow
// their session's active speaker.
type phoneComposites struct {
	svc  *composite.Service
	room func(sid string) *broker.Room
	mu   sync.Mutex
	by   map[string]*phoneComposite // by session
	// watched are the phones' links that receive a composite, by
	// session and link ID: one that stops (someone stopped it, or it
	// failed for good) is replaced (tend).
	watched map[string]*watchSet
	// followers are the links that follow the speaker, by session: link
	// ID to the phone's member; speakers the main session's speakers.
	followers map[string]*follows
	speakers  map[string][]string
}

// follows are a session's links that follow its speaker: link ID to the
// phone's member.
type follows struct {
	links   map[string]string
	showing map[string]string // link ID to the owner of the camera it shows
}

type phoneComposite struct {
	id, member string
	phones     int
}

func newPhoneComposites(svc *composite.Service, room func(sid string) *broker.Room) *phoneComposites {
	return &phoneComposites{svc: svc, room: room, by: map[string]*phoneComposite{},
		followers: map[string]*follows{}, speakers: map[string][]string{}, watched: map[string]*watchSet{}}
}

// followEvery is how often the links that follow a speaker look at the
// room again (cameras come and go between speaker changes).
const followEvery = time.Second

// follow makes link (of the phone's member) hear the session's active
// speaker's camera from now on; the returned func stops that.
func (p *phoneComposites) follow(sid, link, member string) func() {
	p.mu.Lock()
	fs := p.followers[sid]
	first := fs == nil
	if first {
		fs = &follows{links: map[string]string{}, showing: map[string]string{}}
		p.followers[sid] = fs
	}
	fs.links[link] = member
	p.applyLocked(sid)
	p.mu.Unlock()
	if first {
		go func() {
			t := time.NewTicker(followEvery)
			defer t.Stop()
			for range t.C {
				p.mu.Lock()
				if p.followers[sid] != fs {
					p.mu.Unlock()
					return
				}
				p.applyLocked(sid)
				p.mu.Unlock()
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			delete(fs.links, link)
			delete(fs.showing, link)
			if len(fs.links) == 0 && p.followers[sid] == fs {
				delete(p.followers, sid)
				delete(p.speakers, sid)
			}
		})
	}
}

// SetSpeakers tells the phones that follow session sid's speaker who
// speaks now (member IDs, the loudest first).
func (p *phoneComposites) SetSpeakers(sid string, members []string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.followers[sid] == nil {
		return
	}
	p.speakers[sid] = append([]string(nil), members...)
	p.applyLocked(sid)
}

// applyLocked points each following link of session sid at the camera it
// shows: the first speaker's with a camera; while nobody speaks, the one
// it shows (so the picture does not flip back between words); else the
// first camera (by track ID); never the phone's own. Under mu.
func (p *phoneComposites) applyLocked(sid string) {
	room := p.room(sid)
	if room == nil {
		return
	}
	var cams []string // owners of video tracks, by track ID
	has := map[string]bool{}
	tracks := room.Tracks()
	sort.Slice(tracks, func(i, j int) bool { return tracks[i].ID() < tracks[j].ID() })
	for _, t := range tracks {
		if o := t.Owner(); t.Kind() == media.Video && o != "" && !has[o] {
			has[o] = true
			cams = append(cams, o)
		}
	}
	fs := p.followers[sid]
	if fs == nil {
		return
	}
	for link, own := range fs.links {
		from := ""
		for _, m := range p.speakers[sid] {
			if m != own && has[m] {
				from = m
				break
			}
		}
		if cur := fs.showing[link]; from == "" && cur != "" && has[cur] {
			from = cur // nobody speaks: the last speaker's camera stays
		}
		for _, m := range cams {
			if from == "" && m != own {
				from = m
			}
		}
		if from == "" {
			from = noOwner
		}
		fs.showing[link] = from
		room.SetFrom(link, from)
	}
}

// acquire returns the member whose composite a phone of session sid
// receives ("" for none) and what gives it back (nil for nothing): a
// composite the phones share, or one that runs for someone else (a chair,
// HLS), which the phones do not stop.
func (p *phoneComposites) acquire(sid, codec string) (member string, release func()) {
	if p == nil || p.svc == nil {
		return "", nil
	}
	if p.room == nil {
		return "", nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.by[sid]; pc != nil {
		pc.phones++
		return pc.member, p.releaser(sid, pc)
	}
	if running := p.svc.List(sid); len(running) > 0 {
		return running[0].Member, nil
	}
	vc := composite.VP8
	if strings.HasPrefix(strings.ToUpper(codec), "H264") {
		vc = composite.H264
	}
	info, err := p.svc.Start(sid, composite.Request{Layout: composite.Grid2, Codec: vc})
	if err != nil {
		return "", nil
	}
	pc := &phoneComposite{id: info.ID, member: info.Member, phones: 1}
	p.by[sid] = pc
	return pc.member, p.releaser(sid, pc)
}

// watchSet is a session's watched links, by link ID.
type watchSet struct{ links map[string]*phoneLink }

// phoneLink is a phone's video link that receives a composite (from, its
// member), and what gives that back (nil: someone else's composite, or,
// once it follows the speaker, what stops that).
type phoneLink struct {
	member, codec, from string
	release             func()
	gone                bool // the phone left
}

// watch keeps link (of the phone's member, in codec) on a composite: it
// receives from's now, given back by release; when that composite stops,
// the link gets another (one that runs, else one started for the phones)
// or, if none can be had, follows the speaker. The returned func gives
// back whatever the link holds then.
func (p *phoneComposites) watch(sid, link, member, codec, from string, release func()) func() {
	p.mu.Lock()
	ws := p.watched[sid]
	first := ws == nil
	if first {
		ws = &watchSet{links: map[string]*phoneLink{}}
		p.watched[sid] = ws
	}
	pl := &phoneLink{member: member, codec: codec, from: from, release: release}
	ws.links[link] = pl
	p.mu.Unlock()
	if first {
		go p.tend(sid, ws)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			pl.gone = true
			rel := pl.release
			p.unwatchLocked(sid, ws, link)
			p.mu.Unlock()
			if rel != nil {
				rel()
			}
		})
	}
}

// tend looks every followEvery at session sid's phone links that
// receive a composite, until none is left, and replaces a composite
// whose member has left the room (its track gone).
func (p *phoneComposites) tend(sid string, ws *watchSet) {
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for range t.C {
		room := p.room(sid)
		p.mu.Lock()
		if p.watched[sid] != ws {
			p.mu.Unlock()
			return
		}
		live := map[string]bool{}
		if room != nil {
			for _, tr := range room.Tracks() {
				if tr.Kind() == media.Video {
					live[tr.Owner()] = true
				}
			}
		}
		stale := map[string]*phoneLink{}
		for link, pl := range ws.links {
			if !live[pl.from] {
				stale[link] = pl
			}
		}
		if pc := p.by[sid]; pc != nil && !live[pc.member] {
			delete(p.by, sid) // the phones' own composite stopped: a new one is started
		}
		p.mu.Unlock()
		for link, pl := range stale {
			p.replace(sid, link, pl, room)
		}
	}
}

// replace gives back the stopped composite link received and finds it
// another, or makes it follow the speaker.
func (p *phoneComposites) replace(sid, link string, pl *phoneLink, room *broker.Room) {
	p.mu.Lock()
	old := pl.release
	pl.release = nil
	p.mu.Unlock()
	if old != nil {
		old()
	}
	from, release := p.acquire(sid, pl.codec)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl.gone {
		if release != nil {
			go release()
		}
		return
	}
	if from != "" {
		pl.from, pl.release = from, release
		if room != nil {
			room.SetFrom(link, from)
		}
		return
	}
	// No composite to be had: the link follows the speaker from now on.
	if ws := p.watched[sid]; ws != nil {
		p.unwatchLocked(sid, ws, link)
	}
	p.mu.Unlock()
	stop := p.follow(sid, link, pl.member)
	p.mu.Lock()
	if pl.gone {
		go stop()
		return
	}
	pl.release = stop
}

// unwatchLocked stops watching link; the session's tend ends with its
// last link. Under mu.
func (p *phoneComposites) unwatchLocked(sid string, ws *watchSet, link string) {
	delete(ws.links, link)
	if len(ws.links) == 0 && p.watched[sid] == ws {
		delete(p.watched, sid)
	}
}

func (p *phoneComposites) releaser(sid string, pc *phoneComposite) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			pc.phones--
			last := pc.phones == 0 && p.by[sid] == pc
			if last {
				delete(p.by, sid)
			}
			p.mu.Unlock()
			if last {
				_ = p.svc.Stop(sid, pc.id)
			}
		})
	}
}

// refusal tells SIP which refusals are for now (503), which name nodes
// with room (302 to their SIP addresses: room to deliver, or a mixer free
// when this node has none) and which are not for now.
func (c conferences) refusal(err error) error {
	if mv := sipMoved(err); mv != nil {
		return mv
	}
	if errors.Is(err, mixer.ErrCapacity) && c.mixRoom != nil {
		if to := c.mixRoom(); len(to) > 0 {
			return &sip.Moved{To: to, Err: err}
		}
	}
	if errors.Is(err, session.ErrUnavailable) || errors.Is(err, session.ErrLimit) || errors.Is(err, session.ErrDraining) {
		return fmt.Errorf("%w: %v", sip.ErrConferenceFull, err)
	}
	return err
}

// Participants is the session's roster for phones subscribed to its
// conference events (RFC 4575).
func (c conferences) Participants(ctx context.Context, sessionID string) ([]sip.Participant, error) {
	ms, err := c.sessions.Members(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]sip.Participant, 0, len(ms))
	for _, m := range ms {
		out = append(out, sip.Participant{ID: m.ID, Name: m.Name, Phone: strings.HasSuffix(m.Name, phoneSuffix)})
	}
	return out, nil
}

// GuestCredentials are the digests of a session's guest PIN.
func (c conferences) GuestCredentials(ctx context.Context, sessionID string) (sipusers.Credentials, bool) {
	md5, sha, ok, err := c.sessions.PIN(ctx, sessionID)
	if err != nil || !ok {
		return sipusers.Credentials{}, false
	}
	return sipusers.Credentials{HA1MD5: md5, HA1SHA256: sha}, true
}

// MediaAddr is where phones send the media of calls the node places: its
// shared RTP port.
func (c conferences) MediaAddr() netip.AddrPort { return c.media }
