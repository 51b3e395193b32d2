package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/composite"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/hls"
	"github.com/convene/convene/internal/playback"
	"github.com/convene/convene/internal/recording"
	"github.com/convene/convene/internal/registry"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/sfu"
	"github.com/convene/convene/internal/sipusers"
	"github.com/convene/convene/internal/thumbnail"
	"github.com/convene/convene/internal/vtranscode"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed openapi.json
var openAPI []byte

// NodeInfo is what GET /api/v1/node shows about the node.
type NodeInfo struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	NATSURL  string `json:"nats_url,omitempty"`
	Embedded bool   `json:"nats_embedded"`
	RTPAddr  string `json:"rtp_addr"`
	RTCPAddr string `json:"rtcp_addr"`
}

// Options configure a Server.
type Options struct {
	Sessions *session.Service
	Node     NodeInfo
	// Capacity, if set, is the node's capacity and load, shown in GET
	// /api/v1/node.
	Capacity func() capacity.Status
	// VTranscoders, if set, lists the running video transcoders, shown in
	// GET /api/v1/node.
	VTranscoders func() []vtranscode.Info
	// Health reports whether the node can serve; nil means healthy.
	Health   func() error
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Pprof mounts Go's profiler under /debug/pprof/.
	Pprof bool
	// Dialler calls phones into sessions (POST …/calls); nil answers 503.
	Dialler Dialler
	// Users are the SIP accounts (/api/v1/users); nil answers 503.
	Users *sipusers.Service
	// Access admits operators and members; nil admits everyone.
	Access *Access
	// Events are the sessions' event streams (WebSocket).
	Events *events.Hub
	// MetricsToken is a bearer token that may read /metrics besides the
	// operator's API key ("" for the key only).
	MetricsToken string
	// RequestTimeout bounds reading a request's body and writing its
	// answer (default 10s); WebSocket upgrades are exempt.
	RequestTimeout time.Duration
	// WSMaxPerSession and WSMax cap open event WebSockets per session and
	// in all (defaults 256 and 4096); WSPing is the keep-alive interval
	// (default 30s): a client that does not answer a ping within it is
	// dropped.
	WSMaxPerSession, WSMax int
	WSPing                 time.Duration
	// RTC is the node's WebRTC (signalling, WHIP, WHEP); nil answers 501.
	RTC *sfu.SFU
	// Chat carries the sessions' conversations (conversation.go); nil
	// answers 501.
	Chat *chat.Service
	// Recordings record sessions (recordings.go); nil answers 503.
	Recordings *recording.Service
	// RecordElsewhere, if set, starts a recording this node refused for
	// its disk capacity on another node of the cluster with room (ok false:
	// none took it, and the refusal stands). StopElsewhere stops one that
	// node writes.
	RecordElsewhere func(ctx context.Context, req recording.NewRecording) (rec recording.Recording, ok bool)
	StopElsewhere   func(ctx context.Context, node, id string) (recording.Recording, error)
	// Playbacks play recordings into sessions (playbacks.go); nil
	// answers 503.
	Playbacks *playback.Service
	// HLS streams sessions to passive viewers and Thumbnails grabs images
	// of video tracks (hls.go); nil answers 503.
	HLS        *hls.Service
	Thumbnails *thumbnail.Service
	// Composites make video composites of sessions (composite.go); nil
	// answers 503.
	Composites *composite.Service
	// Kept, if set, hears of the HLS streams and composites started and
	// stopped through the API, so that in a cluster they outlive their
	// node (the node's catalog record of them); nil keeps none.
	Kept Kept
	// HLSElsewhere, if set, names the base URL (scheme://host[:port]) of
	// the node of the cluster that runs a session's HLS stream when this
	// one does not ("" for none): a viewer's requests are passed to it
	// (hls.go, proxyHLS).
	HLSElsewhere func(session string) string
	// Nodes are the cluster's nodes as this node hears their heartbeats
	// (GET /api/v1/nodes); nil answers 503.
	Nodes *registry.Registry
	// MaxExports caps the recordings exported at a time (export.go;
	// default 2).
	MaxExports int
	// UI serves the web app at every path outside /api/ (nil: a plain
	// index page at /).
	UI http.Handler
}

// Server is the HTTP handler of a node.
type Server struct {
	o   Options
	log *slog.Logger
	mux *http.ServeMux
	m   *metrics
	// fallbackSigner signs tokens when there is no Access.
	fallbackSigner *auth.Signer
	// revoked caches whether the tokens of HLS viewers' prefixes are
	// revoked.
	revoked *revocations
	ws      wsCount
	exports chan struct{} // one token per running export
}

// New returns the node's HTTP handler.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.MaxExports <= 0 {
		o.MaxExports = 2
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.WSMaxPerSession <= 0 {
		o.WSMaxPerSession = 256
	}
	if o.WSMax <= 0 {
		o.WSMax = 4096
	}
	if o.WSPing <= 0 {
		o.WSPing = 30 * time.Second
	}
	exports := make(chan struct{}, o.MaxExports)
	s := &Server{o: o, log: o.Logger, mux: http.NewServeMux(), m: newMetrics(o.Registry, exports),
		fallbackSigner: auth.NewSigner([]byte(auth.RandomHex(32)), nil), exports: exports}
	s.revoked = newRevocations(func(ctx context.Context, sid, id string) error {
		if strings.HasPrefix(id, "m_") { // a member token's prefix: the member is still in
			if _, ok := s.o.Sessions.MemberRole(ctx, sid, id); !ok {
				return fmt.Errorf("%w: the member has left the session", session.ErrForbidden)
			}
			return nil
		}
		return s.o.Sessions.CheckJoinToken(ctx, sid, id)
	})
	s.route("GET /healthz", s.healthz)
	if o.Pprof {
		s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.mux.Handle("GET /metrics", s.metricsAuth(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{})))
	s.route("GET /api/v1/openapi.json", s.openapi)
	s.route("GET /api/v1/node", s.node)
	s.route("GET /api/v1/nodes", s.nodes)
	s.route("GET /api/v1/sessions", s.listSessions)
	s.route("POST /api/v1/sessions", s.createSession)
	s.route("GET /api/v1/sessions/{id}", s.getSession)
	s.route("DELETE /api/v1/sessions/{id}", s.endSession)
	s.route("POST /api/v1/sessions/{id}/rtp-links", s.addRTPLink)
	s.route("DELETE /api/v1/sessions/{id}/rtp-links/{link}", s.removeLink(session.LinkRTP))
	s.route("POST /api/v1/sessions/{id}/multicast-links", s.addMulticastLink)
	s.route("DELETE /api/v1/sessions/{id}/multicast-links/{link}", s.removeLink(session.LinkMulticast))
	s.route("POST /api/v1/users", s.createUser)
	s.route("GET /api/v1/users", s.listUsers)
	s.route("DELETE /api/v1/users/{username}", s.deleteUser)
	// Lifecycle, access, members, subgroups, floors, events (members.go,
	// floors.go, events.go).
	s.route("POST /api/v1/sessions/{id}/state", s.sessionState)
	s.route("POST /api/v1/sessions/{id}/tokens", s.issueToken)
	s.route("GET /api/v1/sessions/{id}/tokens", s.listTokens)
	s.route("DELETE /api/v1/sessions/{id}/tokens/{token}", s.revokeToken)
	s.route("GET /api/v1/sessions/{id}/members", s.listMembers)
	s.route("POST /api/v1/sessions/{id}/members", s.join)
	s.route("GET /api/v1/sessions/{id}/members/{member}", s.getMember)
	s.route("DELETE /api/v1/sessions/{id}/members/{member}", s.leave)
	s.route("PUT /api/v1/sessions/{id}/members/{member}/subgroup", s.setMemberSubgroup)
	s.route("GET /api/v1/sessions/{id}/subgroups", s.listSubgroups)
	s.route("POST /api/v1/sessions/{id}/subgroups", s.createSubgroup)
	s.route("POST /api/v1/sessions/{id}/pin", s.newPIN)
	s.route("POST /api/v1/sessions/{id}/calls", s.callPhone)
	s.route("DELETE /api/v1/sessions/{id}/pin", s.deletePIN)
	s.route("DELETE /api/v1/sessions/{id}/subgroups/{group}", s.deleteSubgroup)
	s.route("GET /api/v1/sessions/{id}/floors", s.listFloors)
	s.route("GET /api/v1/sessions/{id}/floors/{floor}", s.getFloor)
	s.route("PUT /api/v1/sessions/{id}/floors/{floor}", s.setFloorStyle)
	s.route("POST /api/v1/sessions/{id}/floors/{floor}/{action}", s.floorPrimitive)
	s.route("GET /api/v1/sessions/{id}/events", s.sessionEvents)
	// WebRTC: the browser's signalling socket, WHIP and WHEP (rtc.go).
	s.route("GET /api/v1/sessions/{id}/rtc", s.rtc)
	s.route("POST /api/v1/sessions/{id}/whip", s.whip)
	s.route("POST /api/v1/sessions/{id}/whep", s.whep)
	s.route("DELETE /api/v1/sessions/{id}/whip/{resource}", s.endIngest)
	s.route("DELETE /api/v1/sessions/{id}/whep/{resource}", s.endIngest)
	s.route("PATCH /api/v1/sessions/{id}/whip/{resource}", s.trickle)
	s.route("PATCH /api/v1/sessions/{id}/whep/{resource}", s.trickle)
	// Recordings (recordings.go).
	s.route("GET /api/v1/sessions/{id}/conversation", s.conversation)
	s.route("POST /api/v1/sessions/{id}/recordings", s.startRecording)
	s.route("GET /api/v1/sessions/{id}/recordings", s.listSessionRecordings)
	s.route("GET /api/v1/recordings", s.listRecordings)
	s.route("POST /api/v1/recordings", s.startAdHoc)
	s.route("GET /api/v1/recordings/{rid}", s.getRecording)
	s.route("PATCH /api/v1/recordings/{rid}", s.updateRecording)
	s.route("DELETE /api/v1/recordings/{rid}", s.deleteRecording)
	s.route("POST /api/v1/recordings/{rid}/stop", s.stopRecording)
	s.route("GET /api/v1/recordings/{rid}/export", s.exportRecording)
	s.route("POST /api/v1/recordings/{rid}/play", s.playRecording)
	s.route("GET /api/v1/playbacks/{pid}", s.getPlayback)
	s.route("POST /api/v1/playbacks/{pid}/control", s.controlPlayback)
	s.route("DELETE /api/v1/playbacks/{pid}", s.stopPlayback)
	// HLS and thumbnails (hls.go).
	s.route("POST /api/v1/sessions/{id}/hls", s.startHLS)
	s.route("GET /api/v1/sessions/{id}/hls", s.getHLS)
	s.route("DELETE /api/v1/sessions/{id}/hls", s.stopHLS)
	s.route("GET /hls/{id}/index.m3u8", s.viewHLS)
	s.route("GET /hls/{id}/{stamp}/{file}", s.serveHLS)
	// Video composites (composite.go).
	s.route("POST /api/v1/sessions/{id}/composites", s.startComposite)
	s.route("GET /api/v1/sessions/{id}/composites", s.listComposites)
	s.route("DELETE /api/v1/sessions/{id}/composites/{cid}", s.stopComposite)
	s.route("GET /api/v1/sessions/{id}/tracks/{track}/thumbnail.jpg", s.trackThumbnail)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if o.UI != nil && !strings.HasPrefix(r.URL.Path, "/api/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			o.UI.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/" {
			s.index(w, r)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// ReadFrom hands a body read from r (http.ServeContent's file: HLS
// segments, exports) to the server's own ReadFrom, which sends a file with
// sendfile(2) instead of copying it through a buffer; without it the
// wrapper would hide that from io.Copy.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the
// connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// route registers h for pattern and counts its requests by status.
func (s *Server) route(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if !isUpgrade(r) {
			// A slow body or a reader that never drains the answer is cut
			// off; the server's IdleTimeout then closes the connection.
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(start.Add(s.o.RequestTimeout))
			// The answer gets a second period, so a request whose body ran
			// out of time still hears why.
			_ = rc.SetWriteDeadline(start.Add(2 * s.o.RequestTimeout))
		}
		h(sw, r)
		s.m.requests.WithLabelValues(pattern, strconv.Itoa(sw.status)).Inc()
		s.m.latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
		if sw.status >= 400 && sw.status < 500 {
			s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", sw.status)
		}
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.o.Health != nil {
		if err := s.o.Health(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "error": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	out := struct {
		NodeInfo
		Capacity     *capacity.Status  `json:"capacity,omitempty"`
		VTranscoders []vtranscode.Info `json:"vtranscoders,omitempty"`
	}{NodeInfo: s.o.Node}
	if s.o.Capacity != nil {
		c := s.o.Capacity()
		out.Capacity = &c
	}
	if s.o.VTranscoders != nil {
		out.VTranscoders = s.o.VTranscoders()
	}
	writeJSON(w, http.StatusOK, out)
}

// nodes lists the cluster's nodes: each one's last heartbeat (load and
// capacity), its state and whether it is stale. Operators only, like
// /api/v1/node: load figures are for whoever places work.
func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	if s.o.Nodes == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node keeps no node registry")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": s.o.Nodes.Nodes()})
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(`<!doctype html><title>Convene</title><h1>Convene node ` + html.EscapeString(s.o.Node.ID) + `</h1>
<ul><li><a href="/api/v1/sessions">/api/v1/sessions</a></li>
<li><a href="/api/v1/openapi.json">/api/v1/openapi.json</a> (the API)</li>
<li><a href="/metrics">/metrics</a></li><li><a href="/healthz">/healthz</a></li></ul>`))
}

type createSessionRequest struct {
	Name string `json:"name"`
	// StartAt schedules the session (RFC 3339); absent or past: now.
	StartAt *time.Time `json:"start_at,omitempty"`
	// EndAt finishes it at that time.
	EndAt *time.Time `json:"end_at,omitempty"`
}

func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeBody(r, v); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, status, "invalid_request", err.Error())
		return false
	}
	return true
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	var req createSessionRequest
	if !s.decode(w, r, &req) {
		return
	}
	ns := session.NewSession{Name: req.Name}
	if req.StartAt != nil {
		ns.StartAt = *req.StartAt
	}
	if req.EndAt != nil {
		ns.EndAt = *req.EndAt
	}
	sess, err := s.o.Sessions.CreateSession(r.Context(), ns)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, sess)
}

// listSessions shows the operator every session, and a token holder the
// session of its token.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r, s.sessionOf(r), true)
	if !ok {
		return
	}
	ss, err := s.o.Sessions.List(r.Context())
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	if !p.operator {
		mine := ss[:0]
		for i := range ss {
			if ss[i].ID == p.claims.Session {
				redact(p, &ss[i])
				mine = append(mine, ss[i])
			}
		}
		ss = mine
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": ss})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	p, ok := s.reader(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	sess, err := s.o.Sessions.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	redact(p, &sess)
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	sess, err := s.o.Sessions.End(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) addRTPLink(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r, r.PathValue("id"), false)
	if !ok {
		return
	}
	var req session.NewRTPLink
	if !s.decode(w, r, &req) {
		return
	}
	// A member adds links for itself; the operator for anyone or no one.
	if !p.operator && req.Member != p.member {
		writeError(w, http.StatusForbidden, "forbidden", "a member may add links only for itself (member \""+p.member+"\")")
		return
	}
	// A member's own link is policed: destination policy, caps, consent.
	req.Policed = !p.operator
	l, err := s.o.Sessions.AddRTPLink(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+r.PathValue("id")+"/rtp-links/"+l.ID)
	writeJSON(w, http.StatusCreated, l)
}

func (s *Server) addMulticastLink(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	var req session.NewMulticastLink
	if !s.decode(w, r, &req) {
		return
	}
	l, err := s.o.Sessions.AddMulticastLink(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+r.PathValue("id")+"/multicast-links/"+l.ID)
	writeJSON(w, http.StatusCreated, l)
}

func (s *Server) removeLink(typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.operator(w, r) {
			return
		}
		if err := s.o.Sessions.RemoveLink(r.Context(), r.PathValue("id"), typ, r.PathValue("link")); err != nil {
			s.writeServiceError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
