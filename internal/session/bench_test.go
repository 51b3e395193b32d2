package session

import (
	"context"
	"path/filepath"
	"testing"

	evhub "github.com/convene/convene/internal/events"
)

// BenchmarkCreate is the session service's part of POST /api/v1/sessions:
// the catalog write, the room, the floors and two events.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	svc, _ := newService(b, filepath.Join(b.TempDir(), "c.db"))
	svc.o.Events = evhub.New(evhub.Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Create(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
