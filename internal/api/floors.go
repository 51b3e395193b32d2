package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/convene/convene/internal/floor"
)

// floorBody is the body of a floor primitive, over REST and over the event
// WebSocket (where Op names the primitive and ID is echoed in the reply).
type floorBody struct {
	ID    string `json:"id,omitempty"`
	Op    string `json:"op,omitempty"`
	Floor string `json:"floor,omitempty"`
	// RequestID names the request of grant, deny and cancel.
	RequestID string `json:"request_id,omitempty"`
	// Member is whom an operator requests or releases for.
	Member string `json:"member,omitempty"`
	// To receives a transfer or a replica.
	To string `json:"to,omitempty"`
	// TokenID names the token to delete.
	TokenID string `json:"token_id,omitempty"`
	// Members receive distributed replicas (all when empty).
	Members []string `json:"members,omitempty"`
}

// floorActions are the primitives: the seed's tokens and BFCP's deny/cancel.
var floorActions = map[string]bool{"request": true, "grant": true, "deny": true, "cancel": true, "release": true,
	"transfer": true, "replicate": true, "delete": true, "distribute": true, "advance": true}

// floorAction runs one primitive for p; it is shared by REST and WebSocket.
func (s *Server) floorAction(ctx context.Context, p principal, sid, fl, action string, b floorBody) (any, error) {
	if !floorActions[action] {
		return nil, fmt.Errorf("%w: action must be request, grant, deny, cancel, release, transfer, replicate, delete, distribute or advance, not %q", floor.ErrNotFound, action)
	}
	c, err := s.o.Sessions.FloorsToChange(ctx, sid)
	if err != nil {
		return nil, err
	}
	self := p.member
	if p.operator {
		self = b.Member
	}
	if self == "" && (action == "request" || action == "release" || action == "transfer") {
		return nil, fmt.Errorf("%w: the operator must name the member", floor.ErrInvalid)
	}
	switch action {
	case "request":
		return c.Request(self, fl)
	case "release":
		return c.Release(self, fl)
	case "grant":
		return c.Grant(p.by(), b.RequestID)
	case "deny":
		return c.Deny(p.by(), b.RequestID)
	case "cancel":
		return c.Cancel(p.by(), b.RequestID)
	case "transfer":
		return c.Transfer(self, fl, b.To)
	case "replicate":
		by := p.by()
		if p.operator && b.Member != "" {
			by = b.Member
		}
		return c.Replicate(by, fl, b.To)
	case "delete":
		return map[string]string{"deleted": b.TokenID}, c.Delete(p.by(), fl, b.TokenID)
	case "distribute":
		return c.Distribute(p.by(), fl, b.Members)
	default: // advance
		return c.Advance(p.by(), fl)
	}
}

// floorStatus maps the floor controller's errors to statuses.
func floorStatus(err error) (int, string, bool) {
	switch {
	case errors.Is(err, floor.ErrNotFound):
		return http.StatusNotFound, "not_found", true
	case errors.Is(err, floor.ErrForbidden):
		return http.StatusForbidden, "forbidden", true
	case errors.Is(err, floor.ErrConflict):
		return http.StatusConflict, "conflict", true
	case errors.Is(err, floor.ErrInvalid):
		return http.StatusBadRequest, "invalid_request", true
	}
	return 0, "", false
}

func (s *Server) writeFloorError(w http.ResponseWriter, r *http.Request, err error) {
	if st, code, ok := floorStatus(err); ok {
		writeError(w, st, code, err.Error())
		return
	}
	s.writeServiceError(w, r, err)
}

func (s *Server) floorPrimitive(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	p, ok := s.caller(w, r, sid, false)
	if !ok {
		return
	}
	var b floorBody
	if !s.decode(w, r, &b) {
		return
	}
	out, err := s.floorAction(r.Context(), p, sid, r.PathValue("floor"), r.PathValue("action"), b)
	if err == nil {
		// Answered once the change is durable (its event went out already).
		err = s.o.Sessions.FloorsSaved(r.Context(), sid)
	}
	if err != nil {
		s.writeFloorError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listFloors(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	c, err := s.o.Sessions.Floors(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"floors": c.States()})
}

func (s *Server) getFloor(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	c, err := s.o.Sessions.Floors(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	st, err := c.State(r.PathValue("floor"))
	if err != nil {
		s.writeFloorError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// setFloorStyle switches a floor's style (chair or operator).
func (s *Server) setFloorStyle(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok {
		return
	}
	var set floor.Settings
	if !s.decode(w, r, &set) {
		return
	}
	c, err := s.o.Sessions.FloorsToChange(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	st, err := c.SetStyle(p.by(), r.PathValue("floor"), set)
	if err == nil {
		err = s.o.Sessions.FloorsSaved(r.Context(), r.PathValue("id"))
	}
	if err != nil {
		s.writeFloorError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
