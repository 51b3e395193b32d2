package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/floor"
)

const (
	defaultTokenTTL = time.Hour
	maxTokenTTL     = 7 * 24 * time.Hour
)

type stateRequest struct {
	Action string `json:"action"`
}

// sessionState applies a lifecycle action (operator or chair).
func (s *Server) sessionState(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	var req stateRequest
	if !s.decode(w, r, &req) {
		return
	}
	sess, err := s.o.Sessions.Transition(r.Context(), r.PathValue("id"), req.Action)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

type tokenRequest struct {
	Role       string `json:"role"`
	TTLSeconds int    `json:"ttl_seconds,omitempty"`
	// MaxUses is how many members the token may admit (default
	// defaultTokenUses, at most maxTokenUses).
	MaxUses int `json:"max_uses,omitempty"`
}

// Join tokens admit this many members unless the issuer says otherwise.
const (
	defaultTokenUses = 25
	maxTokenUses     = 10000
)

type tokenResponse struct {
	Token     string    `json:"token"`
	ID        string    `json:"id,omitempty"`
	MaxUses   int       `json:"max_uses,omitempty"`
	SessionID string    `json:"session_id"`
	Role      string    `json:"role"`
	Member    string    `json:"member,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// A chair hands out listener tokens (a link to listen in) and view tokens
// (role auth.RoleViewer: the viewer link of an HLS broadcast, which
// watches and admits no member) only, within tighter bounds than the
// operator's: a day at most, fewer uses, and not past chairMaxLiveTokens
// live join tokens in the session, so a chair cannot fill the catalog.
// View tokens have these bounds whoever issues them (the operator's count
// only its view tokens). A view token's uses are not counted: a viewer's
// player opens the stream again and again (max_uses is kept as issued).
const (
	chairMaxTokenTTL   = 24 * time.Hour
	chairMaxTokenUses  = 1000
	chairMaxLiveTokens = 50
)

// issueToken signs a join token for a session and a role: the operator
// any role, a chair of the session listener and view tokens only (within
// the chairMax bounds above).
func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok {
		return
	}
	var req tokenRequest
	if !s.decode(w, r, &req) {
		return
	}
	view := req.Role == auth.RoleViewer
	if !floor.ValidRole(req.Role) && !view {
		writeError(w, http.StatusBadRequest, "invalid_request", "role must be chair, participant, listener or viewer")
		return
	}
	if !p.operator && req.Role != floor.RoleListener && !view {
		writeError(w, http.StatusForbidden, "forbidden", "a chair issues listener and view tokens only; chair and participant tokens need the node's API key")
		return
	}
	// A view token has a chair's bounds whoever issues it.
	maxTTL, maxUses := maxTokenTTL, maxTokenUses
	if !p.operator || view {
		maxTTL, maxUses = chairMaxTokenTTL, chairMaxTokenUses
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if req.TTLSeconds == 0 {
		ttl = defaultTokenTTL
	}
	if ttl <= 0 || ttl > maxTTL {
		writeError(w, http.StatusBadRequest, "invalid_request", "ttl_seconds must be 1.."+strconv.Itoa(int(maxTTL/time.Second)))
		return
	}
	uses := req.MaxUses
	if uses == 0 {
		uses = defaultTokenUses
	}
	if uses < 1 || uses > maxUses {
		writeError(w, http.StatusBadRequest, "invalid_request", "max_uses must be 1.."+strconv.Itoa(maxUses))
		return
	}
	sid := r.PathValue("id")
	if (!p.operator || view) && !s.roomForToken(w, r, sid, p.operator) {
		return
	}
	exp := time.Now().Add(ttl)
	rec, err := s.o.Sessions.IssueJoinToken(r.Context(), sid, req.Role, uses, exp)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	c := auth.Claims{Session: sid, Role: req.Role, Expires: exp.Unix(), ID: rec.ID}
	writeJSON(w, http.StatusCreated, tokenResponse{Token: s.signer().Sign(c), ID: rec.ID, MaxUses: uses, SessionID: sid,
		Role: req.Role, ExpiresAt: c.ExpiresAt()})
}

// roomForToken answers 429 when the session already has
// chairMaxLiveTokens join tokens that are neither expired nor revoked: a
// chair's count is every live join and view token of the session, the
// operator's (who is bounded for view tokens only) its live view tokens.
func (s *Server) roomForToken(w http.ResponseWriter, r *http.Request, sid string, operator bool) bool {
	ts, err := s.o.Sessions.JoinTokens(r.Context(), sid)
	if err != nil {
		s.writeServiceError(w, r, err)
		return false
	}
	live, now := 0, time.Now()
	for _, t := range ts {
		if !t.Revoked && t.ExpiresAt.After(now) && (!operator || t.Role == auth.RoleViewer) {
			live++
		}
	}
	if live >= chairMaxLiveTokens {
		what := "live join tokens, as many as a chair may add"
		if operator {
			what = "live view tokens, as many as it may have"
		}
		writeError(w, http.StatusTooManyRequests, "limit_reached",
			"the session has "+strconv.Itoa(live)+" "+what+"; revoke some (DELETE …/tokens/{token}) or wait for them to expire")
		return false
	}
	return true
}

// listTokens shows a session's join tokens: uses and revocation (chair or
// operator); the tokens themselves are not kept.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	ts, err := s.o.Sessions.JoinTokens(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ts})
}

// revokeToken stops a join token from admitting anyone (chair or
// operator); members it already admitted stay.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	if err := s.o.Sessions.RevokeJoinToken(r.Context(), r.PathValue("id"), r.PathValue("token")); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) signer() *auth.Signer {
	if s.o.Access != nil {
		return s.o.Access.Tokens
	}
	return s.fallbackSigner
}

type joinRequest struct {
	Name string `json:"name"`
	// Role is for an operator adding a member; a join token carries its own.
	Role string `json:"role,omitempty"`
}

// join adds a member with a join token's role (or, for an operator, the
// role asked) and returns a member token for its later requests.
func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	p, ok := s.caller(w, r, sid, true)
	if !ok {
		return
	}
	var req joinRequest
	if !s.decode(w, r, &req) {
		return
	}
	role, exp := p.role, p.claims.ExpiresAt()
	if p.operator {
		role, exp = req.Role, time.Now().Add(defaultTokenTTL*24)
	} else if p.member != "" {
		writeError(w, http.StatusConflict, "conflict", "this token's member has already joined")
		return
	} else if req.Role != "" && req.Role != role {
		writeError(w, http.StatusForbidden, "forbidden", "the join token is for role "+role)
		return
	}
	if !p.operator {
		if err := s.o.Sessions.UseJoinToken(r.Context(), sid, p.claims.ID); err != nil {
			s.writeServiceError(w, r, err)
			return
		}
	}
	m, err := s.o.Sessions.Join(r.Context(), sid, req.Name, role)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	c := auth.Claims{Session: sid, Role: role, Member: m.ID, Expires: exp.Unix()}
	w.Header().Set("Location", "/api/v1/sessions/"+sid+"/members/"+m.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"member": m,
		"token": tokenResponse{Token: s.signer().Sign(c), SessionID: sid, Role: role, Member: m.ID, ExpiresAt: c.ExpiresAt()}})
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	ms, err := s.o.Sessions.Members(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": ms})
}

func (s *Server) getMember(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	m, err := s.o.Sessions.GetMember(r.Context(), r.PathValue("id"), r.PathValue("member"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// leave removes a member: the member itself, a chair or the operator.
func (s *Server) leave(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r, r.PathValue("id"), false)
	if !ok {
		return
	}
	if !p.chair() && p.member != r.PathValue("member") {
		writeError(w, http.StatusForbidden, "forbidden", "a member may remove only itself")
		return
	}
	if err := s.o.Sessions.Leave(r.Context(), r.PathValue("id"), r.PathValue("member")); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type subgroupRequest struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

func (s *Server) createSubgroup(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok {
		return
	}
	var req subgroupRequest
	if !s.decode(w, r, &req) {
		return
	}
	g, err := s.o.Sessions.CreateSubgroup(r.Context(), r.PathValue("id"), req.Name, p.member, req.Members)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+r.PathValue("id")+"/subgroups/"+g.ID)
	writeJSON(w, http.StatusCreated, g)
}

func (s *Server) listSubgroups(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	gs, err := s.o.Sessions.Subgroups(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"subgroups": gs})
}

func (s *Server) deleteSubgroup(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	if err := s.o.Sessions.DeleteSubgroup(r.Context(), r.PathValue("id"), r.PathValue("group")); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type memberSubgroupRequest struct {
	Subgroup string `json:"subgroup"`
}

func (s *Server) setMemberSubgroup(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	var req memberSubgroupRequest
	if !s.decode(w, r, &req) {
		return
	}
	m, err := s.o.Sessions.SetSubgroup(r.Context(), r.PathValue("id"), r.PathValue("member"), req.Subgroup)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}
