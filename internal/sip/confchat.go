package sip

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// A phone in a session takes part in its chat with SIP MESSAGE (RFC 3428)
// inside its call: the node sends each chat line it delivers to the phone
// as a MESSAGE, and a MESSAGE from the phone is said in the session in its
// member's name.

// MaxText is the longest text a MESSAGE may carry either way, in bytes.
const MaxText = 4000

// confDialog is what the node needs to send requests inside a phone's
// conference call: the dialog's tags and the phone's Contact.
type confDialog struct {
	callID   string
	ourTag   string
	to       sip.Uri // the phone's address of record (its From)
	theirTag string
	target   sip.Uri // its Contact
	tp, addr string
	ready    chan struct{} // closed once the 200 OK went out
	mu       sync.Mutex
	cseq     uint32
}

// newConfDialog takes the dialog of an INVITE the node will answer with
// To-tag ourTag; nil without a Contact.
func newConfDialog(req *sip.Request, ourTag string) *confDialog {
	c := req.Contact()
	if c == nil || req.From() == nil {
		return nil
	}
	theirTag, _ := req.From().Params.Get("tag")
	return &confDialog{callID: string(*req.CallID()), ourTag: ourTag, to: *req.From().Address.Clone(), theirTag: theirTag,
		target: *c.Address.Clone(), tp: strings.ToLower(req.Transport()), addr: req.Source(), cseq: 100, ready: make(chan struct{})}
}

// ErrNoDialog is returned by Say for a phone whose INVITE named no
// Contact to send requests to.
var ErrNoDialog = errors.New("sip: the call has no dialog to send in")

// say sends text to the phone in a MESSAGE inside its call.
func (s *Server) say(d *confDialog, session, text string) error {
	if d == nil {
		return ErrNoDialog
	}
	if len(text) > MaxText {
		text = text[:MaxText]
	}
	select { // the dialog exists for the phone once it has the 200 OK
	case <-d.ready:
	case <-time.After(5 * time.Second):
		return ErrNoDialog
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	req := s.dialogRequest(d, session, sip.MESSAGE)
	req.AppendHeader(sip.NewHeader("Content-Type", "text/plain;charset=UTF-8"))
	req.SetBody([]byte(text))
	s.route(req, d.tp, d.addr)
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	res, err := s.client.Do(ctx, req)
	if err != nil {
		s.m.chat.WithLabelValues("failed").Inc()
		return fmt.Errorf("sip: MESSAGE to %s: %w", d.target.String(), err)
	}
	if res.StatusCode >= 300 {
		s.m.chat.WithLabelValues("refused").Inc()
		return fmt.Errorf("sip: MESSAGE to %s: %d %s", d.target.String(), res.StatusCode, res.Reason)
	}
	s.m.chat.WithLabelValues("sent").Inc()
	return nil
}

// confMessage answers a MESSAGE inside a conference call: plain text goes
// to the session's chat in the phone's name.
func (s *Server) confMessage(req *sip.Request, tx sip.ServerTransaction, call ConferenceCall) {
	ct := "text/plain"
	if h := req.ContentType(); h != nil {
		ct = strings.ToLower(strings.TrimSpace(h.Value()))
	}
	switch {
	case !strings.HasPrefix(ct, "text/plain"):
		res := sip.NewResponseFromRequest(req, sip.StatusUnsupportedMediaType, "Unsupported Media Type", nil)
		res.AppendHeader(sip.NewHeader("Accept", "text/plain"))
		s.respond(tx, res)
	case len(req.Body()) > MaxText:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusRequestEntityTooLarge, "Request Entity Too Large", nil))
	case call.Text == nil:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusNotImplemented, "Not Implemented", nil))
	default:
		// A line's own line break (SIPp's, some phones') is not text.
		if err := call.Text(strings.TrimRight(string(req.Body()), "\r\n")); err != nil {
			s.m.chat.WithLabelValues("refused_in").Inc()
			res := sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Service Unavailable", nil)
			res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", err.Error())))
			s.respond(tx, res)
			return
		}
		s.m.chat.WithLabelValues("received").Inc()
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	}
}

// dialogRequest is a request of method from the node inside a phone's
// conference call d, with the dialog's next CSeq: to the phone's Contact,
// from the session at the node's domain with the node's tag.
func (s *Server) dialogRequest(d *confDialog, session string, method sip.RequestMethod) *sip.Request {
	d.mu.Lock()
	d.cseq++
	cseq, target := d.cseq, *d.target.Clone()
	d.mu.Unlock()
	req := sip.NewRequest(method, target)
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: session, Host: s.o.Domain}}
	from.Params.Add("tag", d.ourTag)
	req.AppendHeader(from)
	to := &sip.ToHeader{Address: *d.to.Clone()}
	if d.theirTag != "" {
		to.Params.Add("tag", d.theirTag)
	}
	req.AppendHeader(to)
	cid := sip.CallIDHeader(d.callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: method})
	return req
}
