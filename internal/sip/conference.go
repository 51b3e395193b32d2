package sip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/pion/sdp/v3"

	"github.com/convene/convene/internal/sipusers"
)

// Conferences lets phones dial into sessions (INVITE sip:<session>@domain):
// the server authenticates the caller, answers the SDP offer as the
// session's user agent, and hands the media to the session.
type Conferences interface {
	// IsConference reports whether user names a session a phone may join.
	IsConference(ctx context.Context, user string) bool
	// Join makes the caller a member of its session, hearing and
	// speaking through a mixed audio link. It returns the node's media
	// address and the call's member.
	Join(ctx context.Context, c Caller) (local netip.AddrPort, call ConferenceCall, err error)
}

// sourceIP is the IP of a "host:port" a message came from (invalid if
// it is not one).
func sourceIP(hostport string) netip.Addr {
	h, _ := splitHostPort(hostport)
	ip, _ := netip.ParseAddr(strings.Trim(h, "[]"))
	return ip.Unmap()
}

// Caller is a phone joining a session.
type Caller struct {
	Session string
	User    string // the SIP account (or "guest")
	Display string // the name it is shown with
	// Media is where the phone receives RTP (its SDP); Signal is the IP
	// its SIP came from, where its media comes from instead when it is
	// behind NAT (the link latches onto it).
	Media  netip.AddrPort
	Signal netip.Addr
	// Codec is the mix's codec ("PCMU", "opus/48000/2:111");
	// TelephoneEvent the RFC 4733 payload type of its digits (-1: none).
	Codec          string
	TelephoneEvent int
	// Say sends the phone a line of text in a MESSAGE inside its call
	// (the session's chat); it blocks until the phone answers (5 s at
	// most).
	Say func(text string) error
	// Video is the phone's video stream when its offer has one in a codec
	// the node forwards (VP8, H.264 in packetization mode 1); nil if not.
	Video *VideoOffer
}

// VideoOffer is a phone's offered video stream, in the codec the node
// chose from it.
type VideoOffer struct {
	// Media is where the phone receives its video RTP.
	Media netip.AddrPort
	// Codec is the rtpmap entry ("VP8/90000", "H264/90000"), PT its
	// payload type in the phone's offer and Fmtp its format parameters
	// there ("" for none).
	Codec string
	PT    uint8
	Fmtp  string
}

// ConferenceCall is a phone's membership of a session.
type ConferenceCall struct {
	// Leave hangs the member up.
	Leave func()
	// Digit takes a digit the phone sent in a SIP INFO; nil ignores them.
	Digit func(digit byte)
	// Text takes what the phone sent in a MESSAGE inside the call (the
	// session's chat); nil answers 501.
	Text func(text string) error
	// Video is the node's address for the phone's video stream; invalid
	// (the zero value) refuses the stream (port 0 in the answer).
	// VideoDirection is the answer's direction for it, from the node's
	// side: "recvonly" (the node takes the phone's camera and sends it
	// nothing) or "sendrecv".
	Video          netip.AddrPort
	VideoDirection string
	// Keep, if set, is given the call's dialog once the phone has the
	// node's answer (and again after the node took the call over,
	// Server.Resume), for another node to take the call over.
	Keep func(Dialog)
	// Drop, if set, lets go of what this node holds for the call while
	// its member stays (another node serves the call now: Server.LetGo).
	Drop func()
}

// ErrConferenceFull is what a Conferences returns when the session or the
// node cannot take another caller now (503).
var ErrConferenceFull = errors.New("sip: the conference cannot take another caller now")

// Moved is what a Conferences returns to send a caller to other nodes of
// the cluster, which have room for it where this one has none: a 302
// Moved Temporarily whose Contacts are the session at each (RFC 3261
// 21.3.3; the caller retries there, and authenticates there again).
type Moved struct {
	// To are the SIP servers' host:port, preferred first.
	To  []string
	Err error // why not here
}

func (m *Moved) Error() string {
	return fmt.Sprintf("sip: the conference is to be joined through %s: %v", strings.Join(m.To, ", "), m.Err)
}

func (m *Moved) Unwrap() error { return m.Err }

// moved answers an INVITE to session with a 302 naming the session at
// each of mv.To, the first preferred (q 1.0, 0.9, …):
//
//	SIP/2.0 302 Moved Temporarily
//	Contact: <sip:s_1@10.0.0.2:5060>;q=1.0
//	Contact: <sip:s_1@10.0.0.3:5060>;q=0.9
//	Warning: 399 convene "node over capacity: …"
func (s *Server) moved(req *sip.Request, tx sip.ServerTransaction, session string, mv *Moved) {
	s.m.calls.WithLabelValues("conference_moved").Inc()
	res := sip.NewResponseFromRequest(req, sip.StatusMovedTemporarily, "Moved Temporarily", nil)
	for i, to := range mv.To {
		res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>;q=%.1f", session, to, max(1-0.1*float64(i), 0.1))))
	}
	res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", mv.Err.Error())))
	s.respond(tx, res)
}

// confCalls are the calls answered into sessions, by Call-ID.
type confCalls struct {
	mu    sync.Mutex
	calls map[string]ConferenceCall
}

func (c *confCalls) add(callID string, call ConferenceCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]ConferenceCall{}
	}
	c.calls[callID] = call
}

func (c *confCalls) take(callID string) (ConferenceCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.calls[callID]
	delete(c.calls, callID)
	return f, ok
}

func (c *confCalls) get(callID string) (ConferenceCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.calls[callID]
	return f, ok
}

// offer is what the node takes from a phone's SDP offer.
type offer struct {
	remote netip.AddrPort
	codec  string // for the session link ("PCMU", "opus/48000/2:111")
	pt     uint8
	rtpmap string // the answer's a=rtpmap value
	tePT   int    // telephone-event payload type, -1 for none
	// lines are the offer's m-lines in order (the answer has as many,
	// RFC 3264 §6), audio the one the node took, video the index of the
	// video stream it may take (-1 for none) and vid that stream.
	lines []mline
	audio int
	video int
	vid   VideoOffer
}

// mline is what an answer repeats of an offered m-line it refuses.
type mline struct {
	media, proto, format string
}

// maxMediaLines bounds the m-lines of an offer the node answers.
const maxMediaLines = 16

// videoOf picks the first video codec of an offered m-line that the node
// forwards to and from phones: VP8, or H.264 in packetization mode 1
// (the node forwards FU-A fragments, which mode 0 does not take).
func videoOf(m *sdp.MediaDescription, remote netip.AddrPort) (VideoOffer, bool) {
	maps, fmtps := map[int]string{}, map[int]string{}
	for _, a := range m.Attributes {
		if a.Key != "rtpmap" && a.Key != "fmtp" {
			continue
		}
		pt, v, ok := strings.Cut(a.Value, " ")
		n, err := strconv.Atoi(pt)
		if !ok || err != nil {
			continue
		}
		if a.Key == "rtpmap" {
			maps[n] = v
		} else {
			fmtps[n] = strings.TrimSpace(v)
		}
	}
	for _, f := range m.MediaName.Formats {
		pt, err := strconv.Atoi(f)
		if err != nil || pt < 96 || pt > 127 {
			continue
		}
		name, _, _ := strings.Cut(maps[pt], "/")
		switch {
		case strings.EqualFold(name, "VP8"):
			return VideoOffer{Media: remote, Codec: "VP8/90000", PT: uint8(pt), Fmtp: fmtps[pt]}, true
		case strings.EqualFold(name, "H264") && fmtpValue(fmtps[pt], "packetization-mode") == "1":
			return VideoOffer{Media: remote, Codec: "H264/90000", PT: uint8(pt), Fmtp: fmtps[pt]}, true
		}
	}
	return VideoOffer{}, false
}

// fmtpValue is the value of key in an a=fmtp parameter list
// ("profile-level-id=42e01f;packetization-mode=1").
func fmtpValue(fmtp, key string) string {
	for _, kv := range strings.Split(fmtp, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && strings.EqualFold(k, key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// mediaAddr is an m-line's connection address and port (invalid if it
// has none usable).
func mediaAddr(d *sdp.SessionDescription, m *sdp.MediaDescription) (netip.AddrPort, error) {
	conn := d.ConnectionInformation
	if m.ConnectionInformation != nil {
		conn = m.ConnectionInformation
	}
	if conn == nil || conn.Address == nil {
		return netip.AddrPort{}, errors.New("sdp: no connection address")
	}
	addr, err := netip.ParseAddr(conn.Address.Address)
	if err != nil || addr.IsUnspecified() {
		return netip.AddrPort{}, fmt.Errorf("sdp: connection address %q", conn.Address.Address)
	}
	port := m.MediaName.Port.Value
	if port <= 0 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("sdp: port %d", port)
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// parseOffer picks the first audio codec of the offer the node mixes
// (PCMU, PCMA, G722, Opus) and the phone's media address, and notes a
// video stream in a codec the node forwards (videoOf).
func parseOffer(body []byte) (offer, error) {
	var d sdp.SessionDescription
	if err := d.Unmarshal(body); err != nil {
		return offer{}, fmt.Errorf("sdp: %w", err)
	}
	if len(d.MediaDescriptions) > maxMediaLines {
		return offer{}, fmt.Errorf("sdp: %d media lines, more than %d", len(d.MediaDescriptions), maxMediaLines)
	}
	o := offer{audio: -1, video: -1, tePT: -1}
	var audioErr error
	for i, m := range d.MediaDescriptions {
		ml := mline{media: m.MediaName.Media, proto: strings.Join(m.MediaName.Protos, "/"), format: "0"}
		if len(m.MediaName.Formats) > 0 {
			ml.format = m.MediaName.Formats[0]
		}
		o.lines = append(o.lines, ml)
		if m.MediaName.Port.Value == 0 || ml.proto != "RTP/AVP" && ml.media == "video" {
			continue
		}
		switch {
		case ml.media == "audio" && o.audio < 0 && audioErr == nil:
			a, err := audioOf(&d, m)
			if err != nil {
				audioErr = err
				continue
			}
			a.lines, a.audio, a.video, a.vid = o.lines, i, o.video, o.vid
			o = a
		case ml.media == "video" && o.video < 0:
			remote, err := mediaAddr(&d, m)
			if err != nil {
				continue
			}
			if v, ok := videoOf(m, remote); ok {
				o.video, o.vid = i, v
			}
		}
	}
	switch {
	case o.audio >= 0:
		return o, nil
	case audioErr != nil:
		return offer{}, audioErr
	}
	return offer{}, errors.New("sdp: no audio stream")
}

// audioOf reads an offered audio m-line: its address and the first codec
// the node mixes.
func audioOf(d *sdp.SessionDescription, m *sdp.MediaDescription) (offer, error) {
	remote, err := mediaAddr(d, m)
	if err != nil {
		return offer{}, err
	}
	maps := map[int]string{}
	for _, a := range m.Attributes {
		if a.Key != "rtpmap" {
			continue
		}
		pt, name, ok := strings.Cut(a.Value, " ")
		if n, err := strconv.Atoi(pt); ok && err == nil {
			maps[n] = name
		}
	}
	o := offer{remote: remote, tePT: -1}
	for pt, name := range maps {
		if strings.HasPrefix(strings.ToLower(name), "telephone-event/8000") {
			o.tePT = pt
		}
	}
	for _, f := range m.MediaName.Formats {
		pt, err := strconv.Atoi(f)
		if err != nil || pt < 0 || pt > 127 {
			continue
		}
		name := maps[pt]
		switch {
		case pt == 0 || strings.EqualFold(name, "PCMU/8000"):
			o.codec, o.rtpmap = "PCMU:"+f, "PCMU/8000"
		case pt == 8 || strings.EqualFold(name, "PCMA/8000"):
			o.codec, o.rtpmap = "PCMA:"+f, "PCMA/8000"
		case pt == 9 || strings.EqualFold(name, "G722/8000"):
			o.codec, o.rtpmap = "G722:"+f, "G722/8000"
		case strings.HasPrefix(strings.ToLower(name), "opus/48000"):
			o.codec, o.rtpmap = "opus/48000/2:"+f, "opus/48000/2"
		default:
			continue
		}
		o.pt = uint8(pt)
		return o, nil
	}
	return offer{}, errors.New("sdp: no audio codec the node mixes (PCMU, PCMA, G722, opus)")
}

// answerSDP is the node's answer to o, with its media at local: one
// m-line for each of the offer's, in its order (RFC 3264 §6): the audio
// stream, the video stream at video in direction vdir when video is valid,
// every other one refused (port 0).
func answerSDP(o offer, local, video netip.AddrPort, vdir string, id uint64) []byte {
	return sdpOf(o, local, video, vdir, id, 1)
}

// sdpOf is answerSDP with session ID id at version ver: also the offer of
// a re-INVITE, whose streams are the ones negotiated (RFC 3264 §8).
func sdpOf(o offer, local, video netip.AddrPort, vdir string, id, ver uint64) []byte {
	fmts := strconv.Itoa(int(o.pt))
	if o.tePT >= 0 {
		fmts += " " + strconv.Itoa(o.tePT)
	}
	ip := "IP4"
	if local.Addr().Is6() {
		ip = "IP6"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "v=0\r\no=convene %d %d IN %s %s\r\ns=convene\r\nc=IN %s %s\r\nt=0 0\r\n", id, ver, ip, local.Addr(), ip, local.Addr())
	lines := o.lines
	if len(lines) == 0 { // an offer made in code: its audio alone
		lines, o.audio, o.video = []mline{{media: "audio"}}, 0, -1
	}
	for i, ml := range lines {
		switch {
		case i == o.audio:
			fmt.Fprintf(&b, "m=audio %d RTP/AVP %s\r\na=rtpmap:%d %s\r\n", local.Port(), fmts, o.pt, o.rtpmap)
			if o.tePT >= 0 {
				fmt.Fprintf(&b, "a=rtpmap:%d telephone-event/8000\r\na=fmtp:%d 0-16\r\n", o.tePT, o.tePT)
			}
			b.WriteString("a=ptime:20\r\na=sendrecv\r\n")
		case i == o.video && video.IsValid():
			if video.Addr() != local.Addr() {
				fmt.Fprintf(&b, "m=video %d RTP/AVP %d\r\nc=IN %s %s\r\n", video.Port(), o.vid.PT, ipVersion(video.Addr()), video.Addr())
			} else {
				fmt.Fprintf(&b, "m=video %d RTP/AVP %d\r\n", video.Port(), o.vid.PT)
			}
			fmt.Fprintf(&b, "a=rtpmap:%d %s\r\n", o.vid.PT, o.vid.Codec)
			if o.vid.Fmtp != "" && validFmtp(o.vid.Fmtp) {
				fmt.Fprintf(&b, "a=fmtp:%d %s\r\n", o.vid.PT, o.vid.Fmtp)
			}
			if vdir != "sendrecv" {
				vdir = "recvonly"
			}
			b.WriteString("a=" + vdir + "\r\n")
		default:
			// Refused: the offer's media, protocol and first format, port 0
			// (tokens only: anything else becomes a harmless "x").
			fmt.Fprintf(&b, "m=%s 0 %s %s\r\n", sdpToken(ml.media), sdpToken(ml.proto), sdpToken(ml.format))
		}
	}
	return []byte(b.String())
}

func ipVersion(a netip.Addr) string {
	if a.Is6() {
		return "IP6"
	}
	return "IP4"
}

// sdpToken is s if it is a plain SDP token (letters, digits, "/", "-",
// "_", ".", "+", "*"), else "x": what an answer repeats of an offer never
// carries a line break or a space into it.
func sdpToken(s string) string {
	if s == "" || len(s) > 32 {
		return "x"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/-_.+*", c) >= 0) {
			return "x"
		}
	}
	return s
}

// validFmtp reports whether an offered fmtp may be repeated in the answer:
// printable, no line break, bounded.
func validFmtp(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// joinConference answers an authenticated INVITE to a session.
func (s *Server) joinConference(req *sip.Request, tx sip.ServerTransaction, session, user string) {
	o, err := parseOffer(req.Body())
	if err != nil {
		s.m.calls.WithLabelValues("conference_refused").Inc()
		res := sip.NewResponseFromRequest(req, sip.StatusNotAcceptableHere, "Not Acceptable Here", nil)
		res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", err.Error())))
		s.respond(tx, res)
		return
	}
	display := user
	if f := req.From(); f != nil && f.DisplayName != "" {
		display = f.DisplayName
	}
	ourTag := sip.GenerateTagN(16)
	if to := req.To(); to != nil {
		if tag, ok := to.Params.Get("tag"); ok && tag != "" {
			ourTag = tag
		}
	}
	dlg := newConfDialog(req, ourTag)
	caller := Caller{Session: session, User: user, Display: display,
		Media: o.remote, Signal: sourceIP(req.Source()), Codec: o.codec, TelephoneEvent: o.tePT,
		Say: func(text string) error { return s.say(dlg, session, text) }}
	if o.video >= 0 {
		v := o.vid
		caller.Video = &v
	}
	local, call, err := s.o.Conferences.Join(s.ctx, caller)
	var mv *Moved
	if errors.As(err, &mv) && len(mv.To) > 0 {
		s.moved(req, tx, session, mv)
		return
	}
	if err != nil {
		s.m.calls.WithLabelValues("conference_refused").Inc()
		code, reason := sip.StatusServiceUnavailable, "Service Unavailable"
		if !errors.Is(err, ErrConferenceFull) {
			code, reason = sip.StatusForbidden, "Forbidden"
		}
		res := sip.NewResponseFromRequest(req, code, reason, nil)
		res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", err.Error())))
		if code == sip.StatusServiceUnavailable { // for now: RFC 3261 21.5.4
			res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(int(max(s.o.RetryAfter/time.Second, 1)))))
		}
		s.respond(tx, res)
		return
	}
	s.conf.add(string(*req.CallID()), call)
	sdpID := uint64(s.o.Now().UnixNano())
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", answerSDP(o, local, call.Video, call.VideoDirection, sdpID))
	if to := res.To(); to != nil { // sipgo gave it a tag of its own: the dialog's is ourTag
		to.Params.Add("tag", ourTag)
	}
	res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", session, hostPort(s.o.Advertise, s.port))))
	res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	res.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, MESSAGE"))
	s.m.calls.WithLabelValues("conference").Inc()
	s.respond(tx, res)
	if dlg != nil {
		close(dlg.ready) // requests inside the call may go now
		if call.Keep != nil {
			call.Keep(dlg.dialog(session, req.Body(), sdpID))
		}
	}
}

// confInDialog answers a request inside a conference call: BYE hangs the
// member up; INFO may carry a digit (application/dtmf-relay or
// application/dtmf); MESSAGE carries chat (confchat.go); a re-INVITE is
// refused, the call going on as it was.
func (s *Server) confInDialog(req *sip.Request, tx sip.ServerTransaction) bool {
	callID := string(*req.CallID())
	call, ok := s.conf.get(callID)
	if !ok {
		return false
	}
	switch req.Method {
	case sip.BYE:
		if call, ok := s.conf.take(callID); ok && call.Leave != nil {
			call.Leave()
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	case sip.ACK:
	case sip.INVITE:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusNotAcceptableHere, "Not Acceptable Here", nil))
	case sip.INFO:
		ct := ""
		if h := req.ContentType(); h != nil {
			ct = strings.ToLower(h.Value())
		}
		if d, ok := infoDigit(ct, req.Body()); ok && call.Digit != nil {
			call.Digit(d)
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	case sip.MESSAGE:
		s.confMessage(req, tx, call)
	default:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	}
	return true
}

// infoDigit reads the digit of a SIP INFO body: "Signal=5" lines
// (application/dtmf-relay) or a bare digit (application/dtmf).
func infoDigit(contentType string, body []byte) (byte, bool) {
	v := strings.TrimSpace(string(body))
	switch {
	case strings.HasPrefix(contentType, "application/dtmf-relay"):
		v = ""
		for _, l := range strings.Split(string(body), "\n") {
			if k, val, ok := strings.Cut(l, "="); ok && strings.EqualFold(strings.TrimSpace(k), "signal") {
				v = strings.TrimSpace(val)
			}
		}
	case strings.HasPrefix(contentType, "application/dtmf"):
	default:
		return 0, false
	}
	if len(v) != 1 || !strings.Contains("0123456789*#ABCDabcd", v) {
		return 0, false
	}
	return strings.ToUpper(v)[0], true
}

// GuestPINs is the optional part of Conferences that lets guests dial in:
// the digests of a session's PIN for the username "guest" in the realm.
type GuestPINs interface {
	GuestCredentials(ctx context.Context, session string) (sipusers.Credentials, bool)
}

// guestUser is the digest username of a guest with a session's PIN.
const guestUser = "guest"

// confAccounts are the accounts, plus "guest" with the session's PIN.
type confAccounts struct {
	users   Users
	pins    GuestPINs
	session string
	realm   string
}

func (a confAccounts) Lookup(ctx context.Context, username string) (sipusers.Credentials, bool, error) {
	if username == guestUser && a.pins != nil {
		c, ok := a.pins.GuestCredentials(ctx, a.session)
		c.Username, c.Realm = guestUser, a.realm
		return c, ok, nil
	}
	return a.users.Lookup(ctx, username)
}
