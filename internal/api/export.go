package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/convene/convene/internal/export"
)

// Export: GET /recordings/{rid}/export?format=wav|ogg|webm streams the
// recording as one file (package export). Who: the operator, the
// recording's owner or a chair of its session — the same people who may
// stop it; a participant or listener, who may read its metadata, gets
// 403, since the file is every member's voice and picture. What caps it:
// Options.MaxExports exports at a time on the node (each encodes Opus on
// a core), beyond which 503 with Retry-After; a reader that takes no
// bytes for RequestTimeout is cut off.

// retryAfterExport is what an export refused for the cap waits.
const retryAfterExport = 10

func (s *Server) exportRecording(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := s.recordingCaller(w, r, false)
	if !ok {
		return
	}
	if !p.chair() && p.owner() != rec.Owner {
		writeError(w, http.StatusForbidden, "forbidden", "only a chair of the session, the recording's owner or the operator may export it")
		return
	}
	f, err := export.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	select {
	case s.exports <- struct{}{}:
		defer func() { <-s.exports }()
	default:
		s.m.busy.WithLabelValues("export").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterExport))
		writeError(w, http.StatusServiceUnavailable, "export_busy",
			fmt.Sprintf("this node runs %d exports at a time; try again later", cap(s.exports)))
		return
	}
	dir, err := s.o.Recordings.Dir(r.Context(), rec.ID)
	if err != nil {
		s.writeRecordingError(w, r, err)
		return
	}
	x, err := export.Open(dir)
	if err != nil {
		s.log.Warn("export: open recording", "recording", rec.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the recording's files do not read")
		return
	}
	if (f == export.WebM && len(x.Audio) == 0 && len(x.Video) == 0) || (f != export.WebM && len(x.Audio) == 0) {
		writeError(w, http.StatusConflict, "conflict", export.ErrNoStreams.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ContentType())
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, rec.ID, f))
	h.Set("X-Content-Duration", strconv.FormatFloat(x.Duration.Seconds(), 'f', 3, 64))
	if n := x.Size(f); n >= 0 {
		h.Set("Content-Length", strconv.FormatInt(n, 10))
	}
	w.WriteHeader(http.StatusOK)
	// The answer takes as long as the recording is big: each write moves
	// the deadline on, so only a reader that stops reading is cut off.
	dw := &deadlineWriter{w: w, rc: http.NewResponseController(w), d: s.o.RequestTimeout}
	if err := x.Write(dw, f, nil); err != nil && !errors.Is(err, r.Context().Err()) {
		s.log.Warn("export", "recording", rec.ID, "format", f, "err", err)
	}
}

// deadlineWriter pushes the connection's write deadline d past every write.
type deadlineWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.d))
	return d.w.Write(b)
}
