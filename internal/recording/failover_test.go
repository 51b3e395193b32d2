package recording

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/recorder"
)

// clusterNode is a recording service as node id of a cluster sharing f's
// catalog, with its own recordings root, events and room of session s_1
// with one audio track.
func (f *fixture) clusterNode(t *testing.T, id string) (*Service, *events, *broker.Track) {
	t.Helper()
	room := broker.NewRoom("s_1")
	tr, err := room.Join(broker.Member{ID: "m_" + id, Kind: media.Audio, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	rs, ev := &rooms{m: map[string]*broker.Room{"s_1": room}}, &events{}
	s, err := New(context.Background(), Options{Root: filepath.Join(f.root, id), Catalog: f.cat, Rooms: rs, Events: ev,
		Node: id, Recorder: recorder.Options{SyncEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, ev, tr
}

// TestAdoptAndFence: node a records session s_1; node b, the session's
// owner, continues the recording only once a is gone and only under its
// lease, in segment 2 under its own root, and announces recording.moved;
// a, which was only cut off, stops its segment at its next Fence without
// announcing an end; stopped on b, the recording is finished with both
// segments, each file holding what its node recorded.
func TestAdoptAndFence(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cat.CreateSession(ctx, catalog.Session{ID: "s_1", State: "activated", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a, aEv, aTrack := f.clusterNode(t, "a")
	b, bEv, bTrack := f.clusterNode(t, "b")
	r, err := a.Start(ctx, NewRecording{Session: "s_1", Owner: Operator})
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != "a" || r.Segment != 1 {
		t.Fatalf("started on %q, segment %d", r.Node, r.Segment)
	}
	for i := range 50 {
		aTrack.Publish(rtp(uint16(i), 0xa))
	}

	bl, ok, err := f.cat.AcquireLease(ctx, "s_1", "b", time.Now(), time.Minute)
	if err != nil || !ok {
		t.Fatalf("b's lease: %v %v", ok, err)
	}
	alive := func(string) bool { return false }
	gone := func(n string) bool { return n == "a" }
	if n, err := b.Adopt(ctx, bl, alive); n != 0 || err != nil {
		t.Fatalf("b continued %d recordings of a live node (%v)", n, err)
	}
	stale := bl
	stale.Epoch--
	if n, err := b.Adopt(ctx, stale, gone); n != 0 || !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("b continued %d recordings under a stale lease (%v)", n, err)
	}
	if n, err := b.Adopt(ctx, bl, gone); n != 1 || err != nil {
		t.Fatalf("b continued %d recordings of the dead node (%v)", n, err)
	}
	if n, err := b.Adopt(ctx, bl, gone); n != 0 || err != nil {
		t.Fatalf("b continued the recording twice: %d (%v)", n, err)
	}
	if ev := bEv.types(); len(ev) != 1 || ev[0] != event.RecordingMoved {
		t.Errorf("b announced %v, want recording.moved", ev)
	}
	for i := range 30 {
		bTrack.Publish(rtp(uint16(100+i), 0xb))
	}

	a.Fence(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for a.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.Running() != 0 {
		t.Fatal("a still writes a recording that moved on")
	}
	if ev := aEv.types(); len(ev) != 1 || ev[0] != event.RecordingStarted {
		t.Errorf("a announced %v: only its start, not an end of a recording that goes on", ev)
	}
	b.Fence(ctx)
	if b.Running() != 1 {
		t.Fatal("b's Fence stopped the recording it writes")
	}
	got, err := b.Stop(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "finished" || got.Node != "b" || got.Segment != 2 || got.Streams != 2 {
		t.Errorf("stopped: %+v", got)
	}
	d, err := b.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Segments) != 2 || d.Segments[0].Node != "a" || d.Segments[1].Node != "b" || d.Segments[1].State != "finished" ||
		d.Segments[0].SizeBytes == 0 || got.SizeBytes != d.Segments[0].SizeBytes+d.Segments[1].SizeBytes {
		t.Errorf("segments %+v, size %d", d.Segments, got.SizeBytes)
	}
	if len(d.Files) != 1 || d.Files[0].Packets != 30 || d.Files[0].SSRC != 0xb {
		t.Errorf("b's files: %+v", d.Files)
	}
	da, err := a.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(da.Files) != 1 || da.Files[0].Packets != 50 || da.Files[0].SSRC != 0xa {
		t.Errorf("a's files: %+v", da.Files)
	}
}

// TestSessionNoLongerActive: a session deactivated through another node
// (only the catalog says so here) stops node a's recording of it at a's
// next Fence, finished and announced; a recording of it whose node c died
// is ended as interrupted by whichever node runs EndStranded, once c is
// gone, and only once.
func TestSessionNoLongerActive(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cat.CreateSession(ctx, catalog.Session{ID: "s_1", State: "activated", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a, aEv, _ := f.clusterNode(t, "a")
	b, bEv, _ := f.clusterNode(t, "b")
	r, err := a.Start(ctx, NewRecording{Session: "s_1", Owner: Operator})
	if err != nil {
		t.Fatal(err)
	}
	dead := catalog.Recording{ID: "r_dead", SessionID: "s_1", Owner: Operator, State: "recording", StartedAt: time.Now(),
		Dir: "/elsewhere/r_dead", Node: "c"}
	if err := f.cat.CreateRecording(ctx, dead); err != nil {
		t.Fatal(err)
	}
	a.Fence(ctx)
	if a.Running() != 1 {
		t.Fatal("Fence stopped a recording of an active session")
	}
	if n, err := b.EndStranded(ctx, func(string) bool { return true }); n != 0 || err != nil {
		t.Fatalf("EndStranded ended %d recordings of an active session (%v)", n, err)
	}
	if err := f.cat.SetSessionState(ctx, "s_1", "deactivated", time.Now()); err != nil {
		t.Fatal(err)
	}
	a.Fence(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for a.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := a.Lookup(ctx, r.ID); err != nil || got.State != "finished" {
		t.Fatalf("a's recording after the session was deactivated elsewhere: %+v %v", got, err)
	}
	if ev := aEv.types(); len(ev) != 2 || ev[1] != event.RecordingStopped {
		t.Errorf("a announced %v", ev)
	}

	if n, err := b.EndStranded(ctx, func(string) bool { return false }); n != 0 || err != nil {
		t.Fatalf("EndStranded ended %d recordings of a live node (%v)", n, err)
	}
	gone := func(n string) bool { return n == "c" }
	if n, err := b.EndStranded(ctx, gone); n != 1 || err != nil {
		t.Fatalf("EndStranded ended %d recordings of the dead node (%v)", n, err)
	}
	if n, _ := b.EndStranded(ctx, gone); n != 0 {
		t.Errorf("EndStranded ended the recording again: %d", n)
	}
	got, err := b.Lookup(ctx, "r_dead")
	if err != nil || got.State != "interrupted" || got.EndedAt == nil || got.Error == "" {
		t.Errorf("the dead node's recording: %+v %v", got, err)
	}
	if ev := bEv.types(); len(ev) != 1 || ev[0] != event.RecordingStopped {
		t.Errorf("b announced %v, want recording.stopped", ev)
	}
}
