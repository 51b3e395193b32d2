package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/playback"
	"github.com/convene/convene/internal/recording"
)

// Who may play recordings into sessions:
//
//	play     POST   /recordings/{rid}/play {session, speed}   the operator; or a chair of the
//	                                                          recording's session, into that session
//	read     GET    /playbacks/{pid}                          the operator or a token of its session
//	control  POST   /playbacks/{pid}/control {action, …}      the operator or a chair of its session
//	stop     DELETE /playbacks/{pid}                          the operator or a chair of its session
//
// A playback joins a member (named after the recording) whose tracks carry
// the recording's streams: WHEP (?member=) and browsers see it. At most
// playback.Options.Max (4) run at a time on the node (503 + Retry-After).

type playRequest struct {
	Session string  `json:"session"`
	Speed   float64 `json:"speed"`
	Name    string  `json:"name"`
}

type playbackControl struct {
	Action     string  `json:"action"`
	PositionMS int64   `json:"position_ms"`
	Speed      float64 `json:"speed"`
}

func (s *Server) playbacks(w http.ResponseWriter) bool {
	if s.o.Playbacks == nil || s.o.Recordings == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node does not play recordings")
		return false
	}
	return true
}

func (s *Server) playRecording(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := s.recordingCaller(w, r, false)
	if !ok || !s.playbacks(w) {
		return
	}
	var req playRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Session == "" {
		req.Session = rec.Session
	}
	// A chair plays its own session's recordings into its own session.
	if !p.operator && (!p.chair() || req.Session != p.claims.Session) {
		writeError(w, http.StatusForbidden, "forbidden", "only a chair of the session or the operator may play into it")
		return
	}
	if req.Name == "" {
		req.Name = rec.Title
		if req.Name == "" {
			req.Name = rec.ID
		}
	}
	dir, err := s.o.Recordings.Dir(r.Context(), rec.ID)
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	info, err := s.o.Playbacks.Play(r.Context(), playback.Request{Recording: rec.ID, Dir: dir, Session: req.Session,
		Name: strings.ToValidUTF8(truncate("▶ "+req.Name, 64), ""), Speed: req.Speed})
	if err != nil {
		s.writePlaybackError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/playbacks/"+info.ID)
	writeJSON(w, http.StatusCreated, info)
}

// playbackCaller admits the caller of /playbacks/{pid}: 401 without a
// credential, 404 unless the playback runs and, for a token, is in the
// token's session; with chair, 403 unless the caller chairs it.
func (s *Server) playbackCaller(w http.ResponseWriter, r *http.Request, chair bool) (playback.Info, bool) {
	p, ok := s.caller(w, r, s.sessionOf(r), !chair)
	if !ok || !s.playbacks(w) {
		return playback.Info{}, false
	}
	info, err := s.o.Playbacks.Get(r.PathValue("pid"))
	if err == nil && !p.operator && p.claims.Session != info.Session {
		err = playback.ErrNotFound
	}
	if err != nil {
		s.writePlaybackError(w, r, err)
		return info, false
	}
	if chair && !p.chair() {
		writeError(w, http.StatusForbidden, "forbidden", "only a chair of the session or the operator may control a playback")
		return info, false
	}
	return info, true
}

func (s *Server) getPlayback(w http.ResponseWriter, r *http.Request) {
	if info, ok := s.playbackCaller(w, r, false); ok {
		writeJSON(w, http.StatusOK, info)
	}
}

func (s *Server) controlPlayback(w http.ResponseWriter, r *http.Request) {
	info, ok := s.playbackCaller(w, r, true)
	if !ok {
		return
	}
	var req playbackControl
	if !s.decode(w, r, &req) {
		return
	}
	out, err := s.o.Playbacks.Control(info.ID, req.Action, req.PositionMS, req.Speed)
	if err != nil {
		s.writePlaybackError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) stopPlayback(w http.ResponseWriter, r *http.Request) {
	info, ok := s.playbackCaller(w, r, true)
	if !ok {
		return
	}
	out, err := s.o.Playbacks.Stop(info.ID)
	if err != nil {
		s.writePlaybackError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) writePlaybackError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, playback.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, playback.ErrSpeed), errors.Is(err, playback.ErrSeek), errors.Is(err, playback.ErrAction):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, playback.ErrNoMedia):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, playback.ErrBusy):
		s.m.busy.WithLabelValues("playback").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterExport))
		writeError(w, http.StatusServiceUnavailable, "playback_busy", err.Error())
	case errors.Is(err, playback.ErrDraining):
		writeError(w, http.StatusServiceUnavailable, "draining", err.Error())
	case errors.Is(err, recording.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	default:
		s.writeServiceError(w, r, err)
	}
}
