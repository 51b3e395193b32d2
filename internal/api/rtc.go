package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/sfu"
)

// wsConn adapts a WebSocket to sfu.Conn.
type wsConn struct{ c *websocket.Conn }

func (w wsConn) Read(ctx context.Context) ([]byte, error) {
	_, b, err := w.c.Read(ctx)
	return b, err
}

func (w wsConn) Write(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageText, b)
}

// Close ends the socket with a close frame (sfu.Closer).
func (w wsConn) Close(code int, reason string) error {
	return w.c.Close(websocket.StatusCode(code), reason)
}

// rtc is a browser member's signalling socket (docs/signalling.md). Only a
// member token opens it: the node allocates nothing for anyone else.
func (s *Server) rtc(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	if s.o.RTC == nil {
		writeError(w, http.StatusNotImplemented, "no_webrtc", "this node has no WebRTC")
		return
	}
	p, ok := s.memberSocket(w, r, sid, "signalling")
	if !ok {
		return
	}
	defer s.ws.give(sid)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(sfu.MaxFrame)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.keepAlive(ctx, cancel, c)
	if moves, err := strconv.Atoi(r.URL.Query().Get("moves")); err == nil && moves > 0 {
		ctx = sfu.Placed(ctx) // moved here by the web app already: not placed again
	}
	if err := s.o.RTC.Serve(ctx, sid, p.member, wsConn{c}); err != nil {
		c.Close(websocket.StatusPolicyViolation, truncate(err.Error(), 120))
		return
	}
	c.Close(websocket.StatusNormalClosure, "") // if Serve has not closed it (sfu.Closer)
}

// memberSocket admits a member's socket (signalling, conversation): a
// member token of the session, and a place under the sockets' caps, which
// the caller gives back (s.ws.give) when the socket closes.
func (s *Server) memberSocket(w http.ResponseWriter, r *http.Request, sid, what string) (principal, bool) {
	p, ok := s.caller(w, r, sid, false)
	if !ok {
		return p, false
	}
	if p.member == "" {
		writeError(w, http.StatusForbidden, "forbidden", "the "+what+" socket is a member's: join first and use the member token")
		return p, false
	}
	if reason := s.ws.take(sid, s.o.WSMaxPerSession, s.o.WSMax); reason != "" {
		s.m.wsRefused.WithLabelValues(reason).Inc()
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", "too many sockets open ("+reason+" cap)")
		return p, false
	}
	return p, true
}

// keepAlive pings a socket every WSPing and cancels when a ping goes
// unanswered.
func (s *Server) keepAlive(ctx context.Context, cancel context.CancelFunc, c *websocket.Conn) {
	t := time.NewTicker(s.o.WSPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, pcancel := context.WithTimeout(ctx, s.o.WSPing)
			err := c.Ping(pctx)
			pcancel()
			if err != nil {
				if ctx.Err() == nil {
					s.m.wsRefused.WithLabelValues("ping_timeout").Inc()
				}
				cancel()
				return
			}
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (s *Server) whip(w http.ResponseWriter, r *http.Request) { s.ingest(w, r, false) }
func (s *Server) whep(w http.ResponseWriter, r *http.Request) { s.ingest(w, r, true) }

// ingest answers a WHIP publisher's or a WHEP viewer's offer (RFC 9725 and
// the WHEP draft). The bearer is a member token, or a join token (or the
// API key) for which a member is joined — named by ?name=, "WHIP" or
// "WHEP" otherwise — who leaves again when the client hangs up.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request, viewer bool) {
	sid := r.PathValue("id")
	if s.o.RTC == nil {
		writeError(w, http.StatusNotImplemented, "no_webrtc", "this node has no WebRTC")
		return
	}
	p, ok := s.caller(w, r, sid, true)
	if !ok {
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/sdp") {
		writeError(w, http.StatusUnsupportedMediaType, "invalid_request", "the body must be an SDP offer (Content-Type: application/sdp)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, sfu.MaxFrame))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the offer is over 64 KiB or was cut off")
		return
	}
	offer := string(body)
	if !strings.HasPrefix(offer, "v=0") {
		writeError(w, http.StatusBadRequest, "invalid_sdp", "the body is not an SDP offer (it must start with v=0)")
		return
	}
	var opt sfu.ViewerOptions
	if viewer {
		if opt, err = viewerOptions(r.URL.Query()); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
	}
	member, owned := p.member, false
	if member == "" {
		role := p.role
		if p.operator {
			role = floor.RoleParticipant
			if viewer {
				role = floor.RoleListener
			}
		} else if err := s.o.Sessions.UseJoinToken(r.Context(), sid, p.claims.ID); err != nil {
			s.writeServiceError(w, r, err)
			return
		}
		name := r.URL.Query().Get("name")
		if name == "" {
			name = map[bool]string{false: "WHIP", true: "WHEP"}[viewer]
		}
		m, err := s.o.Sessions.Join(r.Context(), sid, truncate(name, 64), role)
		if err != nil {
			s.writeServiceError(w, r, err)
			return
		}
		member, owned = m.ID, true
	}
	var onClose func()
	if owned {
		onClose = func() { _ = s.o.Sessions.Leave(context.Background(), sid, member) }
	}
	var res *sfu.Resource
	kind := "whip"
	if viewer {
		kind = "whep"
		res, err = s.o.RTC.WHEP(r.Context(), sid, member, offer, opt, onClose)
	} else {
		res, err = s.o.RTC.WHIP(r.Context(), sid, member, offer, onClose)
	}
	if err != nil {
		if owned {
			_ = s.o.Sessions.Leave(context.Background(), sid, member)
		}
		switch st, _ := serviceStatus(err); {
		case errors.Is(err, sfu.ErrLimit):
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "limit_reached", err.Error())
		case st != http.StatusInternalServerError:
			s.writeServiceError(w, r, err)
		default:
			writeError(w, http.StatusBadRequest, "invalid_sdp", err.Error())
		}
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+sid+"/"+kind+"/"+res.ID)
	w.Header().Set("Content-Type", "application/sdp")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, res.Answer)
}

// endIngest hangs up a WHIP or WHEP resource. Its unguessable ID is the
// capability; the caller also needs a credential of the session.
func (s *Server) endIngest(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	if s.o.RTC == nil {
		writeError(w, http.StatusNotImplemented, "no_webrtc", "this node has no WebRTC")
		return
	}
	if _, ok := s.caller(w, r, sid, true); !ok {
		return
	}
	if !s.o.RTC.Hangup(sid, r.PathValue("resource")) {
		writeError(w, http.StatusNotFound, "not_found", "no such WHIP or WHEP resource")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// trickle answers PATCH on a resource: the node is ICE-lite with its
// candidates in the answer, so it takes no trickled candidates.
func (s *Server) trickle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "DELETE")
	writeError(w, http.StatusMethodNotAllowed, "not_supported", "the node is ICE-lite and takes no trickled candidates")
}

// viewerOptions reads a WHEP viewer's query: member (whose media),
// max_height (90–1080 lines) and max_fps (1–60) for a transcoded camera.
func viewerOptions(q url.Values) (sfu.ViewerOptions, error) {
	opt := sfu.ViewerOptions{Pin: q.Get("member")}
	for _, f := range []struct {
		name     string
		min, max int
		v        *int
	}{{"max_height", 90, 1080, &opt.MaxHeight}, {"max_fps", 1, 60, &opt.MaxFPS}} {
		s := q.Get(f.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < f.min || n > f.max {
			return opt, fmt.Errorf("%s: want %d to %d", f.name, f.min, f.max)
		}
		*f.v = n
	}
	return opt, nil
}
