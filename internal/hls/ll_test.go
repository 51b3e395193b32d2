package hls

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/mixer"
)

// serveStreams serves a Service's streams as the API does, without its
// checks: /hls/{id}/{file}.
func serveStreams(svc *Service) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hls/{id}/{file}", func(w http.ResponseWriter, r *http.Request) {
		if err := svc.Serve(r.PathValue("id"), r.PathValue("file"), w, r); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	})
	return httptest.NewServer(mux)
}

func fetch(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHeldRequestsBounded: a stream whose child makes nothing (a stub)
// holds a playlist request Hold long, then answers 503; it holds at most
// HeldMax at once and refuses more at once; a held request's goroutine
// ends when the stream stops; a request for what a handler already waits
// for waits with it, taking no other. Names a stream does not serve are 404, and
// so is a part it has not made and never will (its stream stopped).
func TestHeldRequestsBounded(t *testing.T) {
	b := broker.New()
	b.Open("s_1")
	m := NewMetrics()
	svc := NewService(Options{Dir: t.TempDir(), FFmpeg: stubFFmpeg(t), Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{}),
		Hold: 700 * time.Millisecond, HeldMax: 2, Metrics: m})
	defer svc.Close()
	if _, _, err := svc.Start("s_1", StartOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := serveStreams(svc)
	defer srv.Close()

	for _, f := range []string{"stream.sdp", "index.m3u8.tmp", "seg1.ts", "..", "video1_stream.m3u8x", "abc_video1_seg1.mp4", "0123456789ab_video1_part.mp4"} {
		if code, _, _ := fetch(t, srv.URL+"/hls/s_1/"+f); code != 404 {
			t.Errorf("%s: %d, want 404", f, code)
		}
	}
	if code, _, _ := fetch(t, srv.URL+"/hls/s_other/index.m3u8"); code != 404 {
		t.Errorf("a session without a stream: %d, want 404", code)
	}
	// A segment the muxer never made is 404 at once, not held.
	t0 := time.Now()
	if code, _, _ := fetch(t, srv.URL+"/hls/s_1/0123456789ab_video1_seg3.mp4"); code != 404 || time.Since(t0) > 300*time.Millisecond {
		t.Errorf("a segment never made: %d after %v, want 404 at once", code, time.Since(t0))
	}

	// Two held requests (the playlist waits for the first segment), and
	// a third refused while they are.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	took := make([]time.Duration, 2)
	for i, f := range []string{"index.m3u8", "video1_stream.m3u8"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			codes[i], _, _ = fetch(t, srv.URL+"/hls/s_1/"+f)
			took[i] = time.Since(t0)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if n := testutil.ToFloat64(m.held); n != 2 {
		t.Errorf("held gauge %v, want 2", n)
	}
	code, h, _ := fetch(t, srv.URL+"/hls/s_1/audio2_stream.m3u8")
	if code != 503 || h.Get("Retry-After") == "" {
		t.Errorf("a third held request: %d (Retry-After %q), want 503 at once", code, h.Get("Retry-After"))
	}
	wg.Wait()
	for i := range codes {
		if codes[i] != 503 || took[i] < 600*time.Millisecond || took[i] > 3*time.Second {
			t.Errorf("held request %d: %d after %v, want 503 after Hold", i, codes[i], took[i])
		}
	}
	if n := testutil.ToFloat64(m.heldRefused); n != 1 {
		t.Errorf("refused %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.heldTimeouts); n != 2 {
		t.Errorf("timeouts %v, want 2", n)
	}
	// The timed-out requests' handlers still wait on the muxer and count
	// against HeldMax until it makes their files, or the stream stops.
	t0 = time.Now()
	if code, _, _ := fetch(t, srv.URL+"/hls/s_1/audio2_stream.m3u8"); code != 503 || time.Since(t0) > 300*time.Millisecond {
		t.Errorf("while two handlers still wait: %d after %v, want 503 at once", code, time.Since(t0))
	}
	// A request for what a handler already waits for waits with it (no
	// new handler), then times out as well.
	t0 = time.Now()
	if code, _, _ := fetch(t, srv.URL+"/hls/s_1/index.m3u8"); code != 503 || time.Since(t0) < 600*time.Millisecond {
		t.Errorf("the same request again: %d after %v, want 503 after Hold", code, time.Since(t0))
	}
	if n := testutil.ToFloat64(m.held); n != 2 {
		t.Errorf("held gauge %v with a third request waiting with a handler, want 2", n)
	}
	if n := testutil.ToFloat64(m.heldRefused); n != 2 {
		t.Errorf("refused %v, want 2", n)
	}
	if err := svc.Stop("s_1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.held) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := testutil.ToFloat64(m.held); n != 0 {
		t.Errorf("held gauge %v after the stream stopped, want 0", n)
	}
}
