package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/hls"
)

// Video composites (package composite):
//
//	start  POST   /api/v1/sessions/{id}/composites        a chair or the operator: 201; 429 at composite.max,
//	                                                     503 over_capacity (composite.cores, the node's capacity)
//	list   GET    /api/v1/sessions/{id}/composites        a token of the session or the operator
//	stop   DELETE /api/v1/sessions/{id}/composites/{cid}  a chair or the operator: 204
//
// A composite started here is kept (Options.Kept): in a cluster, when its
// node dies, the session's owner starts it again with the same ID and
// request (composite.moved).

// Kept is told of the media services started and stopped through the API
// (not those a node starts for itself: a SIP phone's composite, an HLS
// stream's own), which in a cluster outlive their node; the node keeps
// them in its catalog. It logs what it cannot keep: the service runs, and
// only its failover is lost.
type Kept interface {
	HLSStarted(session, by string, so hls.StartOptions)
	HLSStopped(session string)
	CompositeStarted(info composite.Info, by string)
	CompositeStopped(session, id string)
}

func (s *Server) compositeService(w http.ResponseWriter) bool {
	if s.o.Composites == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node makes no composites")
		return false
	}
	return true
}

func (s *Server) startComposite(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok || !s.compositeService(w) {
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
	if s.o.Kept != nil {
		s.o.Kept.CompositeStarted(info, p.owner())
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
	if s.o.Kept != nil {
		s.o.Kept.CompositeStopped(r.PathValue("id"), r.PathValue("cid"))
	}
	w.WriteHeader(http.StatusNoContent)
}
