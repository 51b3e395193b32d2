package api

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/session"
)

// Access is how the API admits callers: operators by API key, members by
// the tokens of package auth. A Server without Access admits everyone as an
// operator (for harnesses that test something else).
type Access struct {
	Keys   auth.Keys
	Tokens *auth.Signer
}

// principal is who makes a request.
type principal struct {
	operator bool
	member   string // set for a member token
	role     string
	claims   auth.Claims
}

// by is the name the floor controller knows the caller by: "" is the
// operator, who may do what a chair may.
func (p principal) by() string {
	if p.operator {
		return ""
	}
	return p.member
}

func (p principal) chair() bool { return p.operator || p.role == floor.RoleChair }

// credential finds the caller's key or token: X-API-Key, Authorization:
// Bearer, or, only on a WebSocket upgrade (browsers cannot set headers
// there), ?token=. Anywhere else a token in the URL would end up in logs
// and browser history, so it is refused (tokenInURL).
func credential(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	if isUpgrade(r) {
		return r.URL.Query().Get("token")
	}
	return ""
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// tokenInURL reports a credential in the query of a request that is not a
// WebSocket upgrade.
func tokenInURL(r *http.Request) bool {
	return !isUpgrade(r) && r.URL.Query().Has("token")
}

var errNoCredential = errors.New("this needs an API key (X-API-Key or Authorization: Bearer) or a token of the session")

// identify returns who the caller is for session sid ("" for none); a
// join token (no member) is returned with an empty member.
func (s *Server) identify(r *http.Request, sid string) (principal, error) {
	if s.o.Access == nil {
		return principal{operator: true}, nil
	}
	cred := credential(r)
	if cred == "" {
		if tokenInURL(r) {
			return principal{}, errors.New("?token= is accepted only on the WebSocket upgrade; send Authorization: Bearer")
		}
		return principal{}, errNoCredential
	}
	if !auth.IsToken(cred) {
		if s.o.Access.Keys.Valid(cred) {
			return principal{operator: true}, nil
		}
		return principal{}, errors.New("the API key is not valid")
	}
	c, err := s.o.Access.Tokens.Parse(cred)
	if err != nil {
		return principal{}, err
	}
	if sid == "" || c.Session != sid {
		return principal{}, errors.New("the token is for another session")
	}
	p := principal{member: c.Member, role: c.Role, claims: c}
	if c.Member != "" {
		role, ok := s.o.Sessions.MemberRole(r.Context(), sid, c.Member)
		if !ok {
			return principal{}, errors.New("the token's member has left the session")
		}
		p.role = role
	}
	return p, nil
}

// caller answers 401 and returns false unless the request has a valid
// credential; a bare join token counts only where join says so, and a
// view token nowhere (403: it only watches, see viewHLS).
func (s *Server) caller(w http.ResponseWriter, r *http.Request, sid string, join bool) (principal, bool) {
	p, err := s.identify(r, sid)
	if err == nil && p.viewer() {
		writeError(w, http.StatusForbidden, "view_token", errViewToken(sid).Error())
		return p, false
	}
	if err == nil && !p.operator && p.member == "" && !join {
		err = errors.New("a join token only joins; use the member token that joining returned")
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="convene"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
		return p, false
	}
	return p, true
}

// viewer reports a view token: it passes no caller check, only the HLS
// view route (viewHLS), which reads the token itself.
func (p principal) viewer() bool { return !p.operator && p.role == auth.RoleViewer }

// errViewToken says why a view token was refused.
func errViewToken(sid string) error {
	return errors.New("a view token only watches the session's broadcast (GET /hls/" + sid +
		"/index.m3u8?token=…); it does not join, signal, link, chat, take floors or read the session")
}

// operator answers 401/403 unless the caller is an operator.
func (s *Server) operator(w http.ResponseWriter, r *http.Request) bool {
	p, ok := s.caller(w, r, r.PathValue("id"), false)
	if !ok {
		return false
	}
	if !p.operator {
		writeError(w, http.StatusForbidden, "forbidden", "this needs the node's API key")
		return false
	}
	return true
}

// chair answers 401/403 unless the caller is an operator or a chair.
func (s *Server) chair(w http.ResponseWriter, r *http.Request) (principal, bool) {
	p, ok := s.caller(w, r, r.PathValue("id"), false)
	if ok && !p.chair() {
		writeError(w, http.StatusForbidden, "forbidden", "only a chair or the operator may do this")
		return p, false
	}
	return p, ok
}

// reader answers 401 unless the caller may read session sid: the operator,
// or a join or member token of that session.
func (s *Server) reader(w http.ResponseWriter, r *http.Request, sid string) (principal, bool) {
	return s.caller(w, r, sid, true)
}

// sessionOf returns the session a token credential is for ("" for none or
// an API key), so lists can show a token holder its own session only.
func (s *Server) sessionOf(r *http.Request) string {
	if s.o.Access == nil {
		return ""
	}
	cred := credential(r)
	if !auth.IsToken(cred) {
		return ""
	}
	c, err := s.o.Access.Tokens.Parse(cred)
	if err != nil {
		return ""
	}
	return c.Session
}

// redact hides what a non-operator may not see of a session: the addresses
// of links that are not the caller's own (other members' IP:ports).
func redact(p principal, sess *session.Session) {
	if p.operator {
		return
	}
	for i := range sess.Links {
		l := &sess.Links[i]
		if p.member != "" && l.Member == p.member {
			continue
		}
		l.Remote, l.RemoteRTCP, l.Interface = "", "", ""
		l.Local = session.Local{}
	}
}

// metricsAuth guards /metrics: the operator's API key, or the bearer token
// of http.metrics_token (what a Prometheus scrape config can send).
func (s *Server) metricsAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Access != nil {
			cred := credential(r)
			ok := cred != "" && (s.o.Access.Keys.Valid(cred) ||
				(s.o.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(s.o.MetricsToken)) == 1))
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="convene"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "/metrics needs the API key or the metrics token (Authorization: Bearer)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
