package sip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/emiago/sipgo/sip"
)

// A phone's call into a session outlives the node that answered it (issue
// 16, failover). That node keeps the call's Dialog in the catalog
// (ConferenceCall.Keep); when it dies, the session's owner sets the phone
// up again on its own media (Conferences) and re-INVITEs the phone in the
// same dialog with an offer of the same streams at its addresses:
//
//	phone ══ A (kill -9) ─▶ owner B: Resume(dialog) ─▶ INVITE (same Call-ID and tags, Contact B) ─▶ phone
//	                                                 ◀─ 200 OK (its SDP)  ─▶ ACK
//
// RFC 3261 12.2: a re-INVITE is a target refresh, so the phone sends its
// later requests (BYE, INFO, MESSAGE) to B's Contact, and RFC 3264 §8 keeps
// the streams' order; the phone sends its media to B's addresses from then
// on. A node knows nothing of the MESSAGEs the dead one sent, so its CSeq
// jumps ahead (resumeCSeqStep).

// Dialog is what a node needs to take over a phone's conference call that
// another answered: the dialog's identity and the phone's addresses, the
// phone's SDP offer and the node's last SDP version.
type Dialog struct {
	CallID   string `json:"call_id"`
	Session  string `json:"session"`
	OurTag   string `json:"our_tag"`
	TheirTag string `json:"their_tag"`
	// Remote is the phone's address of record (its From), Target its
	// Contact; Transport ("udp", "tcp") and Addr ("ip:port") where its
	// requests came from, where the node sends its own.
	Remote    string `json:"remote"`
	Target    string `json:"target"`
	Transport string `json:"transport"`
	Addr      string `json:"addr"`
	// CSeq is the last CSeq the node used in the dialog.
	CSeq uint32 `json:"cseq"`
	// Offer is the phone's SDP offer; SDPID and SDPVersion the node's o=
	// line in its last SDP.
	Offer      []byte `json:"offer"`
	SDPID      uint64 `json:"sdp_id"`
	SDPVersion uint64 `json:"sdp_version"`
}

// Marshal is d as JSON.
func (d Dialog) Marshal() []byte {
	b, _ := json.Marshal(d)
	return b
}

// ParseDialog reads a Dialog that Marshal wrote, checking what a re-INVITE
// needs of it.
func ParseDialog(b []byte) (Dialog, error) {
	var d Dialog
	if err := json.Unmarshal(b, &d); err != nil {
		return Dialog{}, fmt.Errorf("sip: dialog: %w", err)
	}
	if d.CallID == "" || d.OurTag == "" || d.Session == "" {
		return Dialog{}, errors.New("sip: dialog: no Call-ID, tag or session")
	}
	var u sip.Uri
	if err := sip.ParseUri(d.Target, &u); err != nil {
		return Dialog{}, fmt.Errorf("sip: dialog: target %q: %w", d.Target, err)
	}
	if err := sip.ParseUri(d.Remote, &u); err != nil {
		return Dialog{}, fmt.Errorf("sip: dialog: remote %q: %w", d.Remote, err)
	}
	if d.Transport != "udp" && d.Transport != "tcp" {
		return Dialog{}, fmt.Errorf("sip: dialog: transport %q", d.Transport)
	}
	if _, err := netip.ParseAddrPort(d.Addr); err != nil {
		return Dialog{}, fmt.Errorf("sip: dialog: address %q: %w", d.Addr, err)
	}
	if _, err := parseOffer(d.Offer); err != nil {
		return Dialog{}, fmt.Errorf("sip: dialog: %w", err)
	}
	return d, nil
}

// dialog is what Keep stores of a call the node answered with sdpID.
func (c *confDialog) dialog(session string, offer []byte, sdpID uint64) Dialog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Dialog{CallID: c.callID, Session: session, OurTag: c.ourTag, TheirTag: c.theirTag, Remote: c.to.String(),
		Target: c.target.String(), Transport: c.tp, Addr: c.addr, CSeq: c.cseq, Offer: offer, SDPID: sdpID, SDPVersion: 1}
}

// resumeCSeqStep is how far a node taking a call over moves its CSeq on:
// past any the dead node may have used since the dialog was stored (one
// per MESSAGE it sent the phone).
const resumeCSeqStep = 1 << 16

// resumeTimeout bounds the wait for the phone's answer to a re-INVITE.
const resumeTimeout = 8 * time.Second

// ErrNotResumed is a call whose phone did not take the re-INVITE: it did
// not answer, or refused (481: it had hung up).
var ErrNotResumed = errors.New("sip: the phone did not take the call over")

// Resume takes over the phone's call d that another node answered. rejoin
// sets the call up here — say sends the phone a chat line in the call —
// and returns this node's media address for the phone and the call, as
// Conferences.Join does; the phone is then re-INVITEd with an offer of the
// same streams at those addresses. Once it answers 2xx, the call is this
// node's: its requests are answered here, and call.Keep is given the
// dialog as it is now. If the phone does not take it (ErrNotResumed), or
// rejoin fails, the call is left (call.Leave).
func (s *Server) Resume(ctx context.Context, d Dialog, rejoin func(say func(text string) error) (netip.AddrPort, ConferenceCall, error)) error {
	o, err := parseOffer(d.Offer)
	if err != nil {
		return err
	}
	var target, remote sip.Uri
	if err := sip.ParseUri(d.Target, &target); err != nil {
		return fmt.Errorf("sip: resume: target: %w", err)
	}
	if err := sip.ParseUri(d.Remote, &remote); err != nil {
		return fmt.Errorf("sip: resume: remote: %w", err)
	}
	dlg := &confDialog{callID: d.CallID, ourTag: d.OurTag, to: remote, theirTag: d.TheirTag, target: target,
		tp: d.Transport, addr: d.Addr, cseq: d.CSeq + resumeCSeqStep, ready: make(chan struct{})}
	local, call, err := rejoin(func(text string) error { return s.say(dlg, d.Session, text) })
	if err != nil {
		s.m.calls.WithLabelValues("conference_not_resumed").Inc()
		return err
	}
	req := s.dialogRequest(dlg, d.Session, sip.INVITE)
	cseq := req.CSeq().SeqNo
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(&mf)
	req.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", d.Session, hostPort(s.o.Advertise, s.port))))
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, MESSAGE"))
	version := d.SDPVersion + 1
	req.SetBody(sdpOf(o, local, call.Video, call.VideoDirection, d.SDPID, version))
	tp, addr := d.Transport, d.Addr
	if tp != "udp" { // the dead node's connection is gone: to the Contact
		port := target.Port
		if port == 0 {
			port = 5060
		}
		addr = hostPort(target.Host, port)
	}
	s.route(req, tp, addr)
	rctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	res, err := s.client.Do(rctx, req)
	if err != nil || res.StatusCode/100 != 2 {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		s.m.calls.WithLabelValues("conference_not_resumed").Inc()
		if call.Leave != nil {
			call.Leave()
		}
		return fmt.Errorf("%w: re-INVITE answered %d (%v)", ErrNotResumed, code, err)
	}
	s.inDialogRequest(sip.ACK, req, res, cseq, tp, addr)
	if c := res.Contact(); c != nil { // its Contact may have changed (RFC 3261 12.2.1.2)
		dlg.mu.Lock()
		dlg.target = *c.Address.Clone()
		dlg.mu.Unlock()
	}
	s.conf.add(d.CallID, call)
	close(dlg.ready)
	s.m.calls.WithLabelValues("conference_resumed").Inc()
	if call.Keep != nil {
		next := dlg.dialog(d.Session, d.Offer, d.SDPID)
		next.SDPVersion = version
		call.Keep(next)
	}
	return nil
}

// CallerOf is the phone of a call another node answered, as Join was
// given it (but for Say, which Resume gives, and its names).
func CallerOf(d Dialog) (Caller, error) {
	o, err := parseOffer(d.Offer)
	if err != nil {
		return Caller{}, err
	}
	c := Caller{Session: d.Session, Media: o.remote, Signal: sourceIP(d.Addr), Codec: o.codec, TelephoneEvent: o.tePT}
	if o.video >= 0 {
		v := o.vid
		c.Video = &v
	}
	return c, nil
}

// LetGo forgets a call another node serves now (it took the call over
// while this one was cut off): its requests are no longer answered here
// and what the node held for it is dropped (ConferenceCall.Drop); its
// member stays. It reports whether the node had the call.
func (s *Server) LetGo(callID string) bool {
	call, ok := s.conf.take(callID)
	if !ok {
		return false
	}
	if call.Drop != nil {
		call.Drop()
	}
	s.m.calls.WithLabelValues("conference_let_go").Inc()
	return true
}
