package api

import (
	"errors"
	"net/http"

	"github.com/convene/convene/internal/sipusers"
)

// SIP accounts (package sipusers): POST/GET /api/v1/users,
// DELETE /api/v1/users/{username}. Operator only. Passwords go in, never
// out: only their digests are stored.

type newUserRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// users returns the account service, or answers 503 when SIP is off.
func (s *Server) users(w http.ResponseWriter) *sipusers.Service {
	if s.o.Users == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "SIP accounts are not enabled on this node")
	}
	return s.o.Users
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	us := s.users(w)
	if us == nil {
		return
	}
	var req newUserRequest
	if !s.decode(w, r, &req) {
		return
	}
	u, err := us.Add(r.Context(), req.Username, req.Password)
	if err != nil {
		s.writeUserError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/users/"+u.Username)
	writeJSON(w, http.StatusCreated, u)
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	us := s.users(w)
	if us == nil {
		return
	}
	list, err := us.List(r.Context())
	if err != nil {
		s.writeUserError(w, err)
		return
	}
	if list == nil {
		list = []sipusers.User{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": list})
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	us := s.users(w)
	if us == nil {
		return
	}
	if err := us.Delete(r.Context(), r.PathValue("username")); err != nil {
		s.writeUserError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) writeUserError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sipusers.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, sipusers.ErrExists):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, sipusers.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	default:
		s.log.Error("sip users", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
	}
}
