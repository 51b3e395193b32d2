package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRecordingMoves(t *testing.T) { forDrivers(t, testRecordingMoves) }

// testRecordingMoves: a recording started on node a is continued by the
// session's owner b in segment 2: only under b's current lease, only once
// (a second survivor that read the same row is refused), a's late end
// stores a's segment alone, and the recording's end sums the segments.
func testRecordingMoves(t *testing.T, drv backend) {
	ctx := context.Background()
	s, _ := newStore(t, drv)
	if err := s.CreateSession(ctx, Session{ID: "s_1", State: "activated", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	r := Recording{ID: "r_1", SessionID: "s_1", Owner: "operator", State: "recording", StartedAt: ms(0),
		Dir: "/a/recordings/r_1", Node: "a"}
	if err := s.CreateRecording(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRecording(ctx, "r_1")
	if err != nil || got.Node != "a" || got.Segment != 1 {
		t.Fatalf("created: %+v %v", got, err)
	}
	ttl := 6 * time.Second
	late := ms(10 * time.Second)
	bl, ok, err := s.AcquireLease(ctx, "s_1", "b", late, ttl)
	if err != nil || !ok {
		t.Fatalf("b's lease: %v %v", ok, err)
	}
	cl := Lease{SessionID: "s_1", Node: "c", Epoch: bl.Epoch, Expires: bl.Expires}
	next := Segment{Node: "b", Dir: "/b/recordings/r_1-2", State: "recording", StartedAt: late}
	if err := s.MoveRecording(ctx, cl, late, got, next); !errors.Is(err, ErrFenced) {
		t.Fatalf("a node without the lease moved the recording: %v", err)
	}
	if err := s.MoveRecording(ctx, bl, late, got, next); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveRecording(ctx, bl, late, got, next); !errors.Is(err, ErrMoved) {
		t.Fatalf("the recording moved twice from the same segment: %v", err)
	}
	moved, _ := s.GetRecording(ctx, "r_1")
	if moved.Node != "b" || moved.Segment != 2 || moved.State != "recording" || moved.Dir != r.Dir {
		t.Fatalf("after the move: %+v", moved)
	}

	// a comes back and stores its end: only its segment.
	aEnd := got
	aEnd.State, aEnd.EndedAt, aEnd.SizeBytes, aEnd.Streams = "finished", ms(11*time.Second), 1000, 2
	if err := s.EndRecording(ctx, aEnd); !errors.Is(err, ErrMoved) {
		t.Fatalf("a's end of a moved recording: %v", err)
	}
	if g, _ := s.GetRecording(ctx, "r_1"); g.State != "recording" {
		t.Fatalf("a's end ended the recording b writes: %+v", g)
	}
	bEnd := moved
	bEnd.State, bEnd.EndedAt, bEnd.Duration, bEnd.SizeBytes, bEnd.Streams = "finished", ms(20*time.Second), 20*time.Second, 500, 2
	if err := s.EndRecording(ctx, bEnd); err != nil {
		t.Fatal(err)
	}
	final, _ := s.GetRecording(ctx, "r_1")
	if final.State != "finished" || final.SizeBytes != 1500 || final.Streams != 4 || final.Duration != 20*time.Second {
		t.Errorf("the recording's end: %+v", final)
	}
	segs, err := s.Segments(ctx, "r_1")
	if err != nil || len(segs) != 2 {
		t.Fatalf("segments: %+v %v", segs, err)
	}
	if segs[0].Node != "a" || segs[0].Seq != 1 || segs[0].State != "finished" || segs[0].SizeBytes != 1000 ||
		segs[1].Node != "b" || segs[1].Seq != 2 || segs[1].Dir != next.Dir || segs[1].State != "finished" {
		t.Errorf("segments: %+v", segs)
	}
	wantTime(t, "segment 2 start", segs[1].StartedAt, late)

	// A recording whose node restarted is orphaned once, then moved from "".
	o := Recording{ID: "r_2", SessionID: "s_1", Owner: "operator", State: "recording", StartedAt: ms(0),
		Dir: "/a/recordings/r_2", Node: "a"}
	if err := s.CreateRecording(ctx, o); err != nil {
		t.Fatal(err)
	}
	o.Segment = 1
	if err := s.OrphanRecording(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := s.OrphanRecording(ctx, o); !errors.Is(err, ErrMoved) {
		t.Errorf("orphaned twice: %v", err)
	}
	if segs, _ := s.NodeSegments(ctx, "a"); len(segs) != 1 || segs[0].RecordingID != "r_2" {
		t.Errorf("a's open segments: %+v", segs)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "" {
		t.Errorf("service nodes with an orphaned recording: %q %v", ns, err)
	}
	o.Node = ""
	if rs, err := s.StrandedRecordings(ctx); err != nil || len(rs) != 0 {
		t.Errorf("stranded recordings of an active session: %+v %v", rs, err)
	}
	if err := s.MoveRecording(ctx, bl, late, o, Segment{Node: "b", Dir: "/b/r_2-2", State: "recording", StartedAt: late}); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "b" {
		t.Errorf("service nodes after the move: %q %v", ns, err)
	}
	if err := s.SetSessionState(ctx, "s_1", "finished", ms(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 0 {
		t.Errorf("service nodes of a finished session: %q %v", ns, err)
	}
	if rs, err := s.StrandedRecordings(ctx); err != nil || len(rs) != 1 || rs[0].ID != "r_2" || rs[0].Node != "b" || rs[0].Segment != 2 {
		t.Errorf("stranded recordings of the finished session: %+v %v", rs, err)
	}
}
