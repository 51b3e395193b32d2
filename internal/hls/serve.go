package hls

import (
	"bytes"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The files a stream serves (gohlslib's names): the multivariant
// playlist, the video's and the mix's media playlists, and under a
// random prefix of the stream their init sections, segments and parts.
var (
	fileName = regexp.MustCompile(`^(index\.m3u8|(video|audio)[0-9]{1,2}_stream\.m3u8|[0-9a-f]{12}_(video|audio)[0-9]{1,2}_(init|seg[0-9]{1,19}|part[0-9]{1,19})\.mp4)$`)
)

// ValidFile tells whether name is one a stream may serve.
func ValidFile(name string) bool { return fileName.MatchString(name) }

// Serve answers a viewer's request for a file of a session's stream
// (r's path ends with the file's name; its query may carry the blocking
// reload's _HLS_msn, _HLS_part and _HLS_skip, which gohlslib reads).
// The API checked the viewer's right to it.
//
// Answers are kept (answers): an init section, segment or part never
// changes once made, and a playlist only when the muxer takes more media,
// so most requests are answered from a copy, whole, with its length,
// without gohlslib. Of the requests for one name and query that find no
// copy, one asks gohlslib and the others wait for its answer.
//
// A playlist or part may wait for what the muxer has not made yet (a
// blocking reload, a preload hint): such a request is held at most
// Options.Hold, then answered 503; a stream holds at most Options.HeldMax
// requests that wait (more are 503 at once): a request asking gohlslib
// keeps a goroutine until the muxer makes what it waits for, or stops.
func (s *Service) Serve(session, file string, w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	st := s.streams[session]
	s.mu.Unlock()
	if st == nil || !ValidFile(file) {
		return ErrNotFound
	}
	key := file
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	// A media playlist comes without its leading gaps for every player
	// but Apple's (gaps.go).
	gapless := strings.HasSuffix(file, "_stream.m3u8") && !appleNative(r.UserAgent())
	if gapless {
		key += "#gapless"
	}
	if a := st.answers.get(key, st.mux.gen.Load()); a != nil {
		a.write(w)
		return nil
	}
	m := s.o.Metrics
	f, lead, ok := st.answers.join(key, st.held.acquire)
	if !ok {
		m.heldRefused.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "hls: too many requests wait on this stream", http.StatusServiceUnavailable)
		return nil
	}
	if lead {
		m.held.Inc()
		go st.ask(f, file, r.URL.RawQuery, gapless)
	}
	t := time.NewTimer(s.o.Hold)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		m.heldTimeouts.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "hls: what the request waits for was not made in time", http.StatusServiceUnavailable)
		return nil
	case <-r.Context().Done():
		return nil
	}
	if f.a == nil {
		if f.code == http.StatusBadRequest { // a blocking reload too far ahead or behind, a query that does not parse
			http.Error(w, "hls: the playlist cannot wait for that (_HLS_msn, _HLS_part)", http.StatusBadRequest)
			return nil
		}
		return ErrNotFound // gone from the playlist, never made, or the stream stopped
	}
	f.a.write(w)
	return nil
}

// ask has gohlslib answer a flight's request and keeps the answer (a
// playlist without its leading gaps if gapless). The
// request is gohlslib's own (it reads the path's last element and the
// query only), since it may outlive the viewer's.
func (st *Stream) ask(f *flight, file, query string, gapless bool) {
	defer st.s.o.Metrics.held.Dec()
	defer st.held.release()
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/" + file, RawQuery: query}, Header: http.Header{}}
	rec := &recorder{h: http.Header{}}
	st.mux.m.Handle(rec, req)
	// A playlist answered now shows the muxer as of about now: it stays
	// good until the muxer takes more (a playlist waited for names its
	// part; one a write older still does).
	gen := st.mux.gen.Load()
	var a *answer
	if rec.code == http.StatusOK || rec.code == 0 && rec.body.Len() > 0 {
		a = &answer{body: rec.body.Bytes(), ctype: rec.h.Get("Content-Type"), gen: gen}
		a.playlist = strings.HasSuffix(a.ctype, "mpegurl")
		if a.playlist && gapless {
			a.body = stripGaps(a.body)
		}
		// The viewer's path is its own (a signed prefix): no shared
		// cache keeps what it gets; a playlist changes with every part.
		if a.playlist {
			a.cc = "no-cache, private"
		} else if cc := rec.h.Get("Cache-Control"); cc != "" {
			a.cc = "private, " + cc
		}
	}
	f.code = rec.code
	st.answers.land(f, a)
}

// recorder is the ResponseWriter gohlslib answers into.
type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// answer is a kept answer: a file's bytes, or a playlist's as of the
// muxer's gen.
type answer struct {
	body      []byte
	ctype, cc string
	playlist  bool
	gen       uint64
}

func (a *answer) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	if a.cc != "" {
		h.Set("Cache-Control", a.cc)
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.body)
}

// flight is a request gohlslib is answering, which others with the same
// name and query wait for; a (nil: no answer) and gohlslib's status code
// are set before done closes.
type flight struct {
	key  string
	done chan struct{}
	a    *answer
	code int
}

// answers keeps a stream's answers: at most maxFiles files (the oldest
// go first: a player asks for what the playlist lists now, the last 7
// segments and their parts) and maxLists playlists.
type answers struct {
	mu      sync.Mutex
	files   kept
	lists   kept
	flights map[string]*flight
}

// kept are at most max answers by key; the oldest go first.
type kept struct {
	by    map[string]*answer
	order []string // oldest first
	max   int
}

func (k *kept) put(key string, a *answer) {
	if _, ok := k.by[key]; !ok {
		k.order = append(k.order, key)
	}
	k.by[key] = a
	if len(k.order) > k.max {
		delete(k.by, k.order[0])
		k.order = k.order[1:]
	}
}

const (
	maxFiles = 160
	maxLists = 64
)

// get returns the kept answer for key, a playlist only if made at gen.
func (k *answers) get(key string, gen uint64) *answer {
	k.mu.Lock()
	defer k.mu.Unlock()
	if a := k.files.by[key]; a != nil {
		return a
	}
	if a := k.lists.by[key]; a != nil && a.gen == gen {
		return a
	}
	return nil
}

// join returns the flight for key, and whether the caller leads it (is
// to ask gohlslib); a new flight needs acquire to let it (ok false if
// not).
func (k *answers) join(key string, acquire func() bool) (f *flight, lead, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f := k.flights[key]; f != nil {
		return f, false, true
	}
	if !acquire() {
		return nil, false, false
	}
	if k.flights == nil {
		k.flights = map[string]*flight{}
		k.files = kept{by: map[string]*answer{}, max: maxFiles}
		k.lists = kept{by: map[string]*answer{}, max: maxLists}
	}
	f = &flight{key: key, done: make(chan struct{})}
	k.flights[key] = f
	return f, true, true
}

// land ends flight f with answer a (nil for none) and keeps a.
func (k *answers) land(f *flight, a *answer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := f.key
	delete(k.flights, key)
	f.a = a
	close(f.done)
	if a == nil {
		return
	}
	if a.playlist {
		k.lists.put(key, a)
	} else {
		k.files.put(key, a)
	}
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
