package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/session"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg}})
}

// serviceStatus maps the session service's errors to a status and code.
func serviceStatus(err error) (int, string) {
	switch {
	case errors.Is(err, session.ErrInvalid):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, session.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, session.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, capacity.ErrOverCapacity):
		return http.StatusServiceUnavailable, "over_capacity"
	case errors.Is(err, session.ErrDraining):
		return http.StatusServiceUnavailable, "draining"
	case errors.Is(err, session.ErrLimit):
		return http.StatusTooManyRequests, "limit_reached"
	case errors.Is(err, session.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, session.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

// writeServiceError maps the session service's errors to statuses. A
// refused lifecycle transition also shows the session's current state.
func (s *Server) writeServiceError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := serviceStatus(err)
	var se *session.StateError
	switch {
	case errors.As(err, &se):
		writeJSON(w, status, map[string]any{"error": errorDetail{Code: code, Message: err.Error()}, "state": se.State})
	case status == http.StatusInternalServerError:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, status, code, "internal error; see the node's log")
	default:
		var ref *capacity.Refusal
		if errors.As(err, &ref) {
			w.Header().Set("Retry-After", strconv.Itoa(int(ref.RetryAfter.Seconds())))
			if len(ref.Alternatives) > 0 {
				writeJSON(w, status, refusalBody{errorDetail{Code: code, Message: err.Error()}, ref.Alternatives})
				return
			}
		}
		writeError(w, status, code, err.Error())
	}
}

// refusalBody is an over-capacity 503 in cluster mode: the error and the
// nodes with room for the request, most room first (issue 19). There is no
// Location header: RFC 9110 (10.2.2) gives it a meaning only on 201 and
// 3xx, and a 3xx would have a generic client re-send the request — with
// its API key or token — to another host without being asked. The client
// chooses: the web app moves a member whose token is valid there.
type refusalBody struct {
	Error        errorDetail            `json:"error"`
	Alternatives []capacity.Alternative `json:"alternatives"`
}
