package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/composite"
)

// Video composites (package composite):
//
//	start  POST   /api/v1/sessions/{id}/composites        a chair or the operator: 201; 429 at composite.max,
//	                                                     503 over_capacity (composite.cores, the node's capacity)
//	list   GET    /api/v1/sessions/{id}/composites        a token of the session or the operator
//	stop   DELETE /api/v1/sessions/{id}/composites/{cid}  a chair or the operator: 204

func (s *Server) compositeService(w http.ResponseWriter) bool {
	if s.o.Composites == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node makes no composites")
		return false
	}
	return true
}

func (s *Server) startComposite(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok || !s.compositeService(w) {
		return
	}
	var req composite.Request
	if !s.decode(w, r, &req) {
		return
	}
	sid := r.PathValue("id")
	info, err := s.o.Composites.Start(sid, req)
	switch {
	case errors.Is(err, composite.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	case s.compositeRefused(w, err):
		return
	case errors.Is(err, composite.ErrNoFFmpeg):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	case errors.Is(err, composite.ErrNoSession):
		writeError(w, http.StatusConflict, "conflict", "the session is not active")
		return
	case err != nil:
		// The session refused the composite's member or link.
		s.writeServiceError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+sid+"/composites/"+info.ID)
	writeJSON(w, http.StatusCreated, info)
}

// compositeRefused answers a composite refused for want of room: 429 at
// composite.max, 503 over_capacity by the composites' CPU or the node's
// capacity, both with Retry-After. It reports whether err was one.
func (s *Server) compositeRefused(w http.ResponseWriter, err error) bool {
	var ref *capacity.Refusal
	switch {
	case errors.Is(err, composite.ErrLimit):
		s.m.busy.WithLabelValues("composite").Inc()
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, "limit_reached", err.Error())
	case errors.Is(err, composite.ErrCapacity):
		s.m.busy.WithLabelValues("composite").Inc()
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, "over_capacity", err.Error())
	case errors.As(err, &ref):
		w.Header().Set("Retry-After", strconv.Itoa(int(ref.RetryAfter.Seconds())))
		writeError(w, http.StatusServiceUnavailable, "over_capacity", err.Error())
	default:
		return false
	}
	return true
}

func (s *Server) listComposites(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok || !s.compositeService(w) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"composites": s.o.Composites.List(r.PathValue("id"))})
}

func (s *Server) stopComposite(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok || !s.compositeService(w) {
		return
	}
	if err := s.o.Composites.Stop(r.PathValue("id"), r.PathValue("cid")); err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
