package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readerFromRecorder is a ResponseWriter that can take a body from a
// reader, as net/http's own does (with sendfile for a file).
type readerFromRecorder struct {
	*httptest.ResponseRecorder
	readFrom int
}

func (r *readerFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.readFrom++
	return io.Copy(r.ResponseRecorder, src)
}

// TestStatusWriterKeepsReadFrom: io.Copy into the route's wrapper reaches
// the server's ReadFrom (sendfile for HLS segments), and a writer without
// one still gets the body.
func TestStatusWriterKeepsReadFrom(t *testing.T) {
	rec := &readerFromRecorder{ResponseRecorder: httptest.NewRecorder()}
	sw := &statusWriter{ResponseWriter: rec, status: http.StatusOK}
	// As http.ServeContent sends a file: io.CopyN, a limited reader.
	if _, err := io.CopyN(sw, strings.NewReader("segment bytes"), 13); err != nil {
		t.Fatal(err)
	}
	if rec.readFrom != 1 || rec.Body.String() != "segment bytes" {
		t.Fatalf("ReadFrom called %d times, body %q", rec.readFrom, rec.Body.String())
	}
	plain := httptest.NewRecorder()
	sw = &statusWriter{ResponseWriter: plain, status: http.StatusOK}
	if _, err := io.CopyN(sw, strings.NewReader("more"), 4); err != nil || plain.Body.String() != "more" {
		t.Fatalf("body %q, %v", plain.Body.String(), err)
	}
}
