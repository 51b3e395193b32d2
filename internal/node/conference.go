package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/composite"
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
	var none sip.ConferenceCall
	sessionID := caller.Session
	m, err := c.sessions.Join(ctx, sessionID, caller.Display+phoneSuffix, "participant")
	if err != nil {
		return netip.AddrPort{}, none, confErr(err)
	}
	leave := func() { _ = c.sessions.Leave(context.Background(), sessionID, m.ID) }
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
	l, err := c.sessions.AddRTPLink(ctx, sessionID, session.NewRTPLink{Remote: caller.Media.String(), Kind: "audio",
		Member: m.ID, Mix: mix, Policed: true, Latch: latch})
	if err != nil {
		leave()
		return netip.AddrPort{}, none, confErr(err)
	}
	addr, err := netip.ParseAddr(l.Local.Addr)
	if err != nil {
		leave()
		return netip.AddrPort{}, none, fmt.Errorf("the node's media address %q: %w", l.Local.Addr, err)
	}
	call := sip.ConferenceCall{Leave: leave, Digit: func(d byte) { c.dtmf.digit(sessionID, m.ID, d) }}
	if caller.Video != nil {
		var release func()
		call.Video, call.VideoDirection, release = c.phoneVideo(ctx, sessionID, m.ID, *caller.Video)
		if release != nil {
			inner := leave
			leave = func() {
				inner()
				release()
			}
			call.Leave = leave
		}
	}
	if c.chat != nil && caller.Say != nil {
		// The node orders the chat for the phone and sends it each line,
		// in order, as a MESSAGE (one at a time: the next waits for the
		// phone's answer); the phone's MESSAGEs are said in its name.
		ag, err := c.chat.AttachAgent(ctx, sessionID, m.ID, m.Name, func(from, text string) {
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
		call.Leave = func() {
			ag.Close()
			leave()
		}
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
// link only takes the camera and the answer says recvonly. A link the
// session refuses (its caps, the destination policy) refuses the video
// stream (port 0), not the call. release, if not nil, gives the
// composite back when the phone leaves. Not yet: the active speaker's
// camera through a transcoder when composites are refused, and latching
// a video stream behind NAT (the audio link latches; two links latching
// onto one IP could take each other's packets).
func (c conferences) phoneVideo(ctx context.Context, sessionID, member string, v sip.VideoOffer) (netip.AddrPort, string, func()) {
	req := session.NewRTPLink{Remote: v.Media.String(), Kind: "video", Direction: "sendonly", Codec: v.Codec,
		Member: member, Policed: true}
	dir := "recvonly"
	from, release := c.phones.acquire(sessionID, v.Codec)
	if from != "" {
		req.Direction, req.From, req.SendPT, dir = "sendrecv", from, v.PT, "sendrecv"
	}
	l, err := c.sessions.AddRTPLink(ctx, sessionID, req)
	if err == nil {
		var addr netip.Addr
		if addr, err = netip.ParseAddr(l.Local.Addr); err == nil {
			return netip.AddrPortFrom(addr, uint16(l.Local.RTPPort)), dir, release
		}
	}
	if release != nil {
		release()
	}
	return netip.AddrPort{}, "", nil
}

// phoneComposites are the composites the node started for video phones,
// one a session, shared by its phones and stopped when the last leaves.
type phoneComposites struct {
	svc *composite.Service
	mu  sync.Mutex
	by  map[string]*phoneComposite // by session
}

type phoneComposite struct {
	id, member string
	phones     int
}

func newPhoneComposites(svc *composite.Service) *phoneComposites {
	return &phoneComposites{svc: svc, by: map[string]*phoneComposite{}}
}

// acquire returns the member whose composite a phone of session sid
// receives ("" for none) and what gives it back (nil for nothing): a
// composite the phones share, or one that runs for someone else (a chair,
// HLS), which the phones do not stop.
func (p *phoneComposites) acquire(sid, codec string) (member string, release func()) {
	if p == nil || p.svc == nil {
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

// confErr tells SIP which refusals are for now (503), which name nodes
// with room (302 to their SIP addresses) and which are not for now.
func confErr(err error) error {
	if mv := sipMoved(err); mv != nil {
		return mv
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
