package hls

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The files a stream serves (gohlslib's names): the multivariant
// playlist, the video's and the mix's media playlists, and under a
// random prefix of the stream their init sections, segments and parts.
var (
	fileName    = regexp.MustCompile(`^(index\.m3u8|(video|audio)[0-9]{1,2}_stream\.m3u8|[0-9a-f]{12}_(video|audio)[0-9]{1,2}_(init|seg[0-9]{1,19}|part[0-9]{1,19})\.mp4)$`)
	segmentName = regexp.MustCompile(`_(init|seg[0-9]+)\.mp4$`)
)

// ValidFile tells whether name is one a stream may serve.
func ValidFile(name string) bool { return fileName.MatchString(name) }

// Serve answers a viewer's request for a file of a session's stream
// (r's path ends with the file's name; its query may carry the blocking
// reload's _HLS_msn, _HLS_part and _HLS_skip, which gohlslib reads).
// The API checked the viewer's right to it. Segments and init sections
// are answered at once. A playlist or part may wait for what the muxer
// has not made yet (a blocking reload, a preload hint): such a request
// is held at most Options.Hold, then answered 503; a stream holds at most
// Options.HeldMax of them at once (more are 503 at once): a held request
// keeps a goroutine until the muxer makes what it waits for, or stops.
func (s *Service) Serve(session, file string, w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	st := s.streams[session]
	s.mu.Unlock()
	if st == nil || !ValidFile(file) {
		return ErrNotFound
	}
	// gohlslib reads the path's last element and the query only; the
	// request it gets is its own, since a held one may outlive r.
	u := &url.URL{Path: "/" + file, RawQuery: r.URL.RawQuery}
	req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}
	if segmentName.MatchString(file) {
		g := &gate{w: w, h: http.Header{}}
		st.mux.m.Handle(g, req)
		if !g.wrote {
			return ErrNotFound // gone from the playlist, or never made
		}
		return nil
	}
	m := s.o.Metrics
	if !st.held.acquire() {
		m.heldRefused.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "hls: too many requests wait on this stream", http.StatusServiceUnavailable)
		return nil
	}
	m.held.Inc()
	g := &gate{w: w, h: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer m.held.Dec()
		defer st.held.release()
		st.mux.m.Handle(g, req)
	}()
	t := time.NewTimer(s.o.Hold)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		if g.abandon() {
			m.heldTimeouts.Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "hls: what the request waits for was not made in time", http.StatusServiceUnavailable)
			return nil
		}
		<-done // it answers now
	case <-r.Context().Done():
		if g.abandon() {
			return nil
		}
		<-done
	}
	if !g.wrote {
		return ErrNotFound
	}
	return nil
}

// gate is the ResponseWriter a held request's handler writes to: its
// first write commits the answer to the viewer, unless the wait was
// abandoned before (a time-out has answered): then it writes nothing.
type gate struct {
	w http.ResponseWriter
	h http.Header // the handler's own until it commits

	mu        sync.Mutex
	wrote     bool // committed: read after the handler returned
	abandoned bool
}

func (g *gate) Header() http.Header { return g.h }

func (g *gate) commit(code int) bool {
	if g.abandoned {
		return false
	}
	if !g.wrote {
		g.wrote = true
		dst := g.w.Header()
		for k, v := range g.h {
			dst[k] = v
		}
		// The viewer's path is its own (a signed prefix): no shared
		// cache keeps what it gets; a playlist changes with every part.
		if strings.HasSuffix(dst.Get("Content-Type"), "mpegurl") {
			dst.Set("Cache-Control", "no-cache, private")
		} else if cc := dst.Get("Cache-Control"); cc != "" {
			dst.Set("Cache-Control", "private, "+cc)
		}
		g.w.WriteHeader(code)
	}
	return true
}

func (g *gate) WriteHeader(code int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commit(code)
}

func (g *gate) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.commit(http.StatusOK) {
		return 0, http.ErrHandlerTimeout
	}
	return g.w.Write(b)
}

// abandon gives up on the handler's answer unless it began: true if the
// caller answers instead.
func (g *gate) abandon() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wrote {
		return false
	}
	g.abandoned = true
	return true
}

// holds counts a stream's held requests.
type holds struct {
	mu  sync.Mutex
	n   int
	max int
}

func (h *holds) acquire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n >= h.max {
		return false
	}
	h.n++
	return true
}

func (h *holds) release() {
	h.mu.Lock()
	h.n--
	h.mu.Unlock()
}
