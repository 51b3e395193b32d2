package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/convene/convene/internal/ingest"

	"github.com/convene/convene/internal/recording"
)

// Who may do what with recordings:
//
//	start          POST /sessions/{id}/recordings      the operator or a chair of the session
//	start ad hoc   POST /recordings                    the operator (an endpoint with no session)
//	list           GET  /sessions/{id}/recordings      the operator or a token of the session
//	list, search   GET  /recordings?q=&session=        the operator: all; a token: its session's
//	read           GET  /recordings/{rid}              the operator or a token of its session
//	stop           POST /recordings/{rid}/stop         the operator, a chair of its session, its owner
//	rename         PATCH /recordings/{rid}             the operator or its owner
//	delete         DELETE /recordings/{rid}            the operator or its owner
//
// A token of another session gets 404 for a recording, as for one that
// does not exist.

// retryAfterCapacity is what a recording refused for capacity is told to
// wait: recordings end at any time, a minute is a fair guess.
const retryAfterCapacity = 60

type recordingRequest struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// adHocRequest asks for an ad-hoc recording. Sources are IPs or CIDR
// prefixes that may send; none means the caller's own IP.
type adHocRequest struct {
	Title        string            `json:"title"`
	Description  string            `json:"description"`
	Sources      []string          `json:"sources"`
	PayloadTypes map[string]string `json:"payload_types"`
	IdleS        int               `json:"idle_s"`
}

type recordingPatch struct {
	Title       *string `json:"title"`
	Description *string `json:"description"`
}

func (s *Server) recordings(w http.ResponseWriter) bool {
	if s.o.Recordings == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node does not record")
		return false
	}
	return true
}

// owner is the name a recording's caller owns it by.
func (p principal) owner() string {
	if p.operator {
		return recording.Operator
	}
	return p.member
}

func (s *Server) startRecording(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok || !s.recordings(w) {
		return
	}
	var req recordingRequest
	if !s.decode(w, r, &req) {
		return
	}
	nr := recording.NewRecording{Session: r.PathValue("id"), Owner: p.owner(), Title: req.Title, Description: req.Description}
	rec, err := s.o.Recordings.Start(r.Context(), nr)
	if errors.Is(err, recording.ErrCapacity) && s.o.RecordElsewhere != nil {
		// Placed by load: another node with the disk capacity free records
		// it, pulling the session's tracks (the refusal stands if none can).
		if placed, ok := s.o.RecordElsewhere(r.Context(), nr); ok {
			rec, err = placed, nil
		}
	}
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/recordings/"+rec.ID)
	writeJSON(w, http.StatusCreated, rec)
}

// startAdHoc opens a recording endpoint with no session: the caller sends
// RTP to the address in the answer.
func (s *Server) startAdHoc(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) || !s.recordings(w) {
		return
	}
	var req adHocRequest
	if !s.decode(w, r, &req) {
		return
	}
	if len(req.PayloadTypes) > 32 {
		writeError(w, http.StatusBadRequest, "invalid_request", "payload_types: at most 32")
		return
	}
	pts, err := ingest.ParsePayloadTypes(req.PayloadTypes)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "payload_types: "+err.Error())
		return
	}
	if req.IdleS < 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "idle_s: want 0 (the default) or more")
		return
	}
	var sources []netip.Prefix
	if len(req.Sources) > recording.MaxSources {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("sources: at most %d", recording.MaxSources))
		return
	}
	for _, src := range req.Sources {
		p, err := parseSource(src)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "sources: "+err.Error())
			return
		}
		sources = append(sources, p)
	}
	if len(sources) == 0 {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "sources: name the IPs that will send")
			return
		}
		a := ap.Addr().Unmap()
		sources = []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
	}
	rec, err := s.o.Recordings.StartAdHoc(r.Context(), recording.NewAdHoc{Owner: recording.Operator, Title: req.Title,
		Description: req.Description, Sources: sources, PayloadTypes: pts, Idle: time.Duration(req.IdleS) * time.Second})
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/recordings/"+rec.ID)
	writeJSON(w, http.StatusCreated, rec)
}

// parseSource reads an IP ("192.0.2.7") or a prefix ("192.0.2.0/24").
func parseSource(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP nor a prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (s *Server) listSessionRecordings(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok || !s.recordings(w) {
		return
	}
	s.listRecordingsOf(w, r, r.PathValue("id"))
}

func (s *Server) listRecordings(w http.ResponseWriter, r *http.Request) {
	p, ok := s.reader(w, r, s.sessionOf(r))
	if !ok || !s.recordings(w) {
		return
	}
	sid := r.URL.Query().Get("session")
	if !p.operator {
		if sid != "" && sid != p.claims.Session {
			writeJSON(w, http.StatusOK, map[string]any{"recordings": []recording.Recording{}})
			return
		}
		sid = p.claims.Session
	}
	s.listRecordingsOf(w, r, sid)
}

func (s *Server) listRecordingsOf(w http.ResponseWriter, r *http.Request, sid string) {
	q := r.URL.Query()
	f := recording.Filter{Session: sid, Query: q.Get("q"), Owner: q.Get("owner"), Limit: 1000}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit: want 1 to 1000")
			return
		}
		f.Limit = n
	}
	rs, err := s.o.Recordings.List(r.Context(), f)
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"recordings": rs})
}

// recordingCaller admits the caller of /recordings/{rid}: 401 without a
// valid credential, then 404 unless the recording exists and, for a
// token, is of the token's session.
func (s *Server) recordingCaller(w http.ResponseWriter, r *http.Request, join bool) (principal, recording.Recording, bool) {
	p, ok := s.caller(w, r, s.sessionOf(r), join)
	if !ok || !s.recordings(w) {
		return p, recording.Recording{}, false
	}
	rec, err := s.o.Recordings.Lookup(r.Context(), r.PathValue("rid"))
	if err == nil && !p.operator && p.claims.Session != rec.Session {
		err = recording.ErrNotFound
	}
	if err != nil {
		s.writeRecordingError(w, r, err)
		return p, rec, false
	}
	return p, rec, true
}

func (s *Server) getRecording(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.recordingCaller(w, r, true); !ok {
		return
	}
	d, err := s.o.Recordings.Get(r.Context(), r.PathValue("rid"))
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) stopRecording(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := s.recordingCaller(w, r, false)
	if !ok {
		return
	}
	if !p.chair() && p.owner() != rec.Owner {
		writeError(w, http.StatusForbidden, "forbidden", "only a chair of the session, the recording's owner or the operator may stop it")
		return
	}
	out, err := s.o.Recordings.Stop(r.Context(), rec.ID)
	if errors.Is(err, recording.ErrConflict) && s.o.StopElsewhere != nil && rec.Node != "" &&
		rec.State == "recording" {
		// written by another node (placed there, or continued after its
		// node died): that node stops it
		out, err = s.o.StopElsewhere(r.Context(), rec.Node, rec.ID)
	}
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ownerOrOperator answers 403 unless p owns rec or is the operator.
func ownerOrOperator(w http.ResponseWriter, p principal, rec recording.Recording) bool {
	if p.operator || p.owner() == rec.Owner {
		return true
	}
	writeError(w, http.StatusForbidden, "forbidden", "only the recording's owner or the operator may change or delete it")
	return false
}

func (s *Server) updateRecording(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := s.recordingCaller(w, r, false)
	if !ok || !ownerOrOperator(w, p, rec) {
		return
	}
	var req recordingPatch
	if !s.decode(w, r, &req) {
		return
	}
	out, err := s.o.Recordings.Update(r.Context(), rec.ID, req.Title, req.Description)
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteRecording(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := s.recordingCaller(w, r, false)
	if !ok || !ownerOrOperator(w, p, rec) {
		return
	}
	if err := s.o.Recordings.Delete(r.Context(), rec.ID); err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeRecordingError maps the recording service's errors: capacity is
// 503 with Retry-After, an owner's quota 507 (Insufficient Storage: the
// request is fine, the owner's storage is used up; deleting frees it).
func (s *Server) writeRecordingError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, recording.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, recording.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, recording.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, recording.ErrCapacity):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterCapacity))
		writeError(w, http.StatusServiceUnavailable, "recording_capacity", err.Error())
	case errors.Is(err, recording.ErrDraining):
		writeError(w, http.StatusServiceUnavailable, "draining", err.Error())
	case errors.Is(err, recording.ErrQuota):
		writeError(w, http.StatusInsufficientStorage, "recording_quota", err.Error())
	default:
		s.writeServiceError(w, r, err)
	}
}
