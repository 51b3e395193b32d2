package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/convene/convene/internal/hls"
	"github.com/convene/convene/internal/thumbnail"
)

// HLS for passive viewers, and thumbnails (package hls, thumbnail):
//
//	start  POST   /api/v1/sessions/{id}/hls         a chair or the operator: 201 (200 if it runs), 503 at hls.max;
//	                                                {"video":"composite"} shows a 2×2 composite of the cameras
//	read   GET    /api/v1/sessions/{id}/hls         a token of the session or the operator
//	stop   DELETE /api/v1/sessions/{id}/hls         a chair or the operator: 204
//	view   GET    /hls/{id}/index.m3u8?token=…      a view, join or member token of the session (a
//	                                                chair's viewer link is a view token, which admits
//	                                                to nothing else; not a revoked one): 302 to
//	                                                /hls/{id}/{stamp}/index.m3u8
//	       GET    /hls/{id}/{stamp}/{file}          the playlists, init sections, segments and parts
//	                                                (LL-HLS: fMP4; blocking reloads ?_HLS_msn=&_HLS_part=)
//	                                                under the signed prefix; 401 once the token it was
//	                                                signed for is revoked
//	thumb  GET    /api/v1/sessions/{id}/tracks/{track}/thumbnail.jpg   a token of the session or the operator
//
// A stream started here is kept (Options.Kept): in a cluster, when its
// node dies, the session's owner starts it again under the same paths
// (hls.moved), and the same viewer token opens it there; a node that does
// not run a session's stream passes its viewers' requests to the one that
// does (proxyHLS).
//
// Players cannot set headers, so the viewer's token comes in the query,
// once: the answer sends the player to a path prefix signed for the
// session until the token's expiry (at most viewStampMax), under which
// the playlist's relative segment names resolve; the token itself does
// not travel with every segment request, and a segment without a valid
// stamp is 403. The prefix of a view or join token carries the token's id
// (auth.Signer.Stamp's key): every request under it asks whether the token
// was revoked (revocations, a verdict cached for revocationTTL), so
// revoking a viewer link stops its players within seconds. See SECURITY.md.

// viewStampMax bounds how long a viewer's signed prefix stays valid.
const viewStampMax = 12 * time.Hour

// thumbnailWait is how long a request waits for a track's first image.
const thumbnailWait = 8 * time.Second

func (s *Server) hlsService(w http.ResponseWriter) bool {
	if s.o.HLS == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node streams no HLS")
		return false
	}
	return true
}

func (s *Server) startHLS(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chair(w, r)
	if !ok || !s.hlsService(w) {
		return
	}
	var so hls.StartOptions
	if r.ContentLength != 0 && !s.decode(w, r, &so) {
		return
	}
	info, started, err := s.o.HLS.Start(r.PathValue("id"), so)
	switch {
	case errors.Is(err, hls.ErrVideo):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	case s.compositeRefused(w, err): // its composite was refused
		return
	case errors.Is(err, hls.ErrCapacity):
		s.m.busy.WithLabelValues("hls").Inc()
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, "hls_busy", err.Error())
		return
	case errors.Is(err, hls.ErrNoFFmpeg):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	case errors.Is(err, hls.ErrNoSession):
		writeError(w, http.StatusConflict, "conflict", "the session is not active")
		return
	case err != nil:
		s.log.Warn("hls: start", "session", r.PathValue("id"), "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	code := http.StatusOK
	if started {
		code = http.StatusCreated
		if s.o.Kept != nil {
			s.o.Kept.HLSStarted(r.PathValue("id"), p.owner(), so)
		}
	}
	w.Header().Set("Location", "/api/v1/sessions/"+r.PathValue("id")+"/hls")
	writeJSON(w, code, info)
}

func (s *Server) getHLS(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok || !s.hlsService(w) {
		return
	}
	info, ok := s.o.HLS.Get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", hls.ErrNotFound.Error())
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) stopHLS(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok || !s.hlsService(w) {
		return
	}
	if err := s.o.HLS.Stop(r.PathValue("id")); err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if s.o.Kept != nil {
		s.o.Kept.HLSStopped(r.PathValue("id"))
	}
	w.WriteHeader(http.StatusNoContent)
}

// viewHLS checks a viewer's token and sends the player under the signed
// prefix.
func (s *Server) viewHLS(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	exp, key := time.Now().Add(viewStampMax), ""
	if s.o.Access != nil {
		c, err := s.o.Access.Tokens.Parse(r.URL.Query().Get("token"))
		if err == nil && c.Session != sid {
			err = errors.New("the token is for another session")
		}
		if err == nil && c.Member != "" {
			if _, ok := s.o.Sessions.MemberRole(r.Context(), sid, c.Member); !ok {
				err = errors.New("the token's member has left the session")
			}
			// The prefix carries the member's id: serveHLS stops it once
			// the member has left (or was removed).
			key = c.Member
		}
		if err == nil && c.Member == "" && c.ID != "" {
			// A revoked viewer link lets no new viewer in, and the prefix
			// carries its id, so serveHLS stops the ones it let in.
			err = s.o.Sessions.CheckJoinToken(r.Context(), sid, c.ID)
			key = c.ID
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="convene"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "an HLS viewer needs ?token= (a view, join or member token of the session): "+err.Error())
			return
		}
		if e := c.ExpiresAt(); e.Before(exp) {
			exp = e
		}
	}
	if !s.hlsService(w) {
		return
	}
	if _, ok := s.o.HLS.Get(sid); !ok {
		if !s.proxyHLS(w, r, sid) {
			writeError(w, http.StatusNotFound, "not_found", hls.ErrNotFound.Error())
		}
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/hls/"+sid+"/"+s.signer().Stamp("hls/"+sid, key, exp)+"/"+hls.Playlist, http.StatusFound)
}

// serveHLS serves a stream's playlists, init sections, segments and
// parts under a signed prefix (hls.Service.Serve: a blocking playlist
// reload or a preload hint is held, within bounds).
func (s *Server) serveHLS(w http.ResponseWriter, r *http.Request) {
	sid, file := r.PathValue("id"), r.PathValue("file")
	key, err := s.signer().CheckStamp("hls/"+sid, r.PathValue("stamp"))
	if err != nil {
		writeError(w, http.StatusForbidden, "forbidden", err.Error()+"; open /hls/"+sid+"/"+hls.Playlist+"?token= again")
		return
	}
	if key != "" && s.o.Access != nil {
		// The token the prefix was signed for may have been revoked since,
		// or its member have left (a cached verdict, at most
		// revocationTTL old).
		if err := s.revoked.refused(r.Context(), sid, key); err != nil {
			if !isForbidden(err) {
				w.Header().Set("Retry-After", "2")
				writeError(w, http.StatusServiceUnavailable, "unavailable", "cannot check the viewer link now: "+err.Error())
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="convene"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "this viewer link no longer plays: "+err.Error())
			return
		}
	}
	if !s.hlsService(w) {
		return
	}
	if _, ok := s.o.HLS.Get(sid); !ok && s.proxyHLS(w, r, sid) {
		return
	}
	if err := s.o.HLS.Serve(sid, file, w, r); err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no such HLS file (yet, or any more)")
	}
}

// hlsProxied marks a viewer's request one node passes to another
// (proxyHLS): that node answers it itself, never passes it on again.
const hlsProxied = "X-Convene-Hls-Proxied"

// proxyHLS passes a viewer's request for a stream this node does not run
// to the node of the cluster that does (Options.HLSElsewhere), after this
// node checked the token or the signed prefix as for its own: so a
// viewer link keeps working through any node, and the web app's viewer
// page, which fetches from its own origin only (its CSP), plays a stream
// that moved to another node (its node died). The other node checks
// again; the request goes without the caller's credential headers. It
// reports whether it passed the request on.
func (s *Server) proxyHLS(w http.ResponseWriter, r *http.Request, sid string) bool {
	if s.o.HLSElsewhere == nil || r.Header.Get(hlsProxied) != "" {
		return false
	}
	base := s.o.HLSElsewhere(sid)
	if base == "" {
		return false
	}
	to, err := url.Parse(base)
	if err != nil || (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" {
		return false
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(to)
			for _, h := range []string{"X-API-Key", "Authorization", "Cookie"} {
				pr.Out.Header.Del(h)
			}
			pr.Out.Header.Set(hlsProxied, "1")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("hls: pass a viewer's request on", "session", sid, "to", to.Host, "err", err)
			w.Header().Set("Retry-After", "2")
			writeError(w, http.StatusBadGateway, "unavailable", "the node that runs this stream did not answer")
		},
	}
	rp.ServeHTTP(w, r)
	return true
}

func (s *Server) trackThumbnail(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.reader(w, r, r.PathValue("id")); !ok {
		return
	}
	if s.o.Thumbnails == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node takes no thumbnails")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), thumbnailWait)
	defer cancel()
	img, at, err := s.o.Thumbnails.Get(ctx, r.PathValue("id"), r.PathValue("track"))
	switch {
	case errors.Is(err, thumbnail.ErrNoTrack):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	case errors.Is(err, thumbnail.ErrCapacity):
		s.m.busy.WithLabelValues("thumbnail").Inc()
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "thumbnail_busy", err.Error())
		return
	case errors.Is(err, thumbnail.ErrNoFFmpeg):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	case errors.Is(err, thumbnail.ErrNotYet):
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusServiceUnavailable, "not_yet", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/jpeg")
	h.Set("Cache-Control", "private, max-age=2")
	h.Set("Last-Modified", at.UTC().Format(http.TimeFormat))
	h.Set("Content-Length", strconv.Itoa(len(img)))
	w.Write(img)
}
