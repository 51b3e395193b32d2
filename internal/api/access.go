package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/floor"
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
// Bearer, or (for browsers' WebSockets, which cannot set headers) ?token=.
func credential(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return r.URL.Query().Get("token")
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
		role, ok := s.o.Sessions.MemberRole(sid, c.Member)
		if !ok {
			return principal{}, errors.New("the token's member has left the session")
		}
		p.role = role
	}
	return p, nil
}

// caller answers 401 and returns false unless the request has a valid
// credential; a bare join token counts only where join says so.
func (s *Server) caller(w http.ResponseWriter, r *http.Request, sid string, join bool) (principal, bool) {
	p, err := s.identify(r, sid)
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
