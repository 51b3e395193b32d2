package session

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/udpmux"
)

type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) SessionEvent(id string, typ event.Type, _ any) error {
	e.mu.Lock()
	e.got = append(e.got, typ.String())
	e.mu.Unlock()
	return nil
}

func newService(t testing.TB, dsn string) (*Service, *events) {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ev := &events{}
	return New(Options{Catalog: cat, Broker: broker.New(), Sockets: testSockets(t), Events: ev}), ev
}

// testSockets are a node's shared RTP and RTCP sockets on 127.0.0.1,
// closed when the test ends.
func testSockets(t testing.TB) rtplink.Sockets {
	t.Helper()
	var socks rtplink.Sockets
	for _, p := range []**udpmux.Socket{&socks.RTP, &socks.RTCP} {
		s, err := udpmux.Listen("127.0.0.1:0", udpmux.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		*p = s
	}
	return socks
}

func TestLifecycleEventsAndRetiredCounters(t *testing.T) {
	ctx := context.Background()
	svc, ev := newService(t, filepath.Join(t.TempDir(), "c.db"))
	s, err := svc.Create(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	l, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47010", Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Local.RTPPort == 0 || l.Local.RTCPPort != l.Local.RTPPort {
		t.Errorf("local %+v: rtcp-mux link must use the RTP port", l.Local)
	}
	if ld := svc.Load(); ld.Sessions != 1 || ld.Links != 1 {
		t.Errorf("load %+v", ld)
	}
	if err := svc.RemoveLink(ctx, s.ID, LinkRTP, l.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.RemoveLink(ctx, s.ID, LinkRTP, l.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second remove: %v", err)
	}
	if _, err := svc.End(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{"created", "activated", "link.added", "link.removed", "finished"}
	if len(ev.got) != len(want) {
		t.Fatalf("events %v, want %v", ev.got, want)
	}
	for i := range want {
		if ev.got[i] != want[i] {
			t.Fatalf("events %v, want %v", ev.got, want)
		}
	}
	if ld := svc.Load(); ld.Sessions != 0 || ld.Links != 0 || ld.Dropped["queue_full"] != 0 {
		t.Errorf("load after end %+v", ld)
	}
}

// A link that cannot be reopened at restore is logged and kept in the
// catalog; the rest of the session comes back.
func TestRestoreSkipsBrokenLink(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	svc, _ := newService(t, dsn)
	s, _ := svc.Create(ctx, "r")
	if _, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47020", Kind: "audio"}); err != nil {
		t.Fatal(err)
	}
	svc.Drain()
	if _, err := svc.Create(ctx, "x"); !errors.Is(err, ErrDraining) {
		t.Fatalf("create while draining: %v", err)
	}

	svc2, _ := newService(t, dsn)
	// Make the stored link unopenable: its remote address is taken.
	if err := svc2.o.Sockets.RTP.Register(netip.MustParseAddrPort("127.0.0.1:47020"), nil); err != nil {
		t.Fatal(err)
	}
	if err := svc2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := svc2.Get(ctx, s.ID)
	if err != nil || got.State != StateActivated || len(got.Links) != 0 {
		t.Fatalf("restored %+v %v", got, err)
	}
	if ls, _ := svc2.o.Catalog.ListLinks(ctx, s.ID); len(ls) != 1 {
		t.Fatalf("catalog lost the link: %d", len(ls))
	}
}
