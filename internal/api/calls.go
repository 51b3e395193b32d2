package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/convene/convene/internal/sip"
)

// Dialler calls a phone into a session (the SIP server).
type Dialler interface {
	Call(ctx context.Context, session, user string) (callID string, err error)
}

type callRequest struct {
	User string `json:"user"`
}

// callPhone makes the node ring an account's registered phone; the phone
// joins the session when it answers (member.joined).
func (s *Server) callPhone(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	if s.o.Dialler == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node places no calls")
		return
	}
	var req callRequest
	if !s.decode(w, r, &req) {
		return
	}
	id, err := s.o.Dialler.Call(r.Context(), r.PathValue("id"), req.User)
	switch {
	case errors.Is(err, sip.ErrNotRegistered):
		writeError(w, http.StatusConflict, "not_registered", err.Error())
		return
	case errors.Is(err, sip.ErrBusy):
		writeError(w, http.StatusServiceUnavailable, "busy", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"call_id": id, "user": req.User, "state": "ringing"})
}
