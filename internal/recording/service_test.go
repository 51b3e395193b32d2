package recording

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtpdump"
)

// rooms is a set of live rooms by session, as the session service has them.
type rooms struct {
	mu sync.Mutex
	m  map[string]*broker.Room
}

func (r *rooms) Room(id string) *broker.Room {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *rooms) set(id string, room *broker.Room) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if room == nil {
		delete(r.m, id)
	} else {
		r.m[id] = room
	}
}

// events keeps what the service announced.
type events struct {
	mu  sync.Mutex
	got []event.Type
}

func (e *events) SessionEvent(_ string, typ event.Type, _ any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, typ)
	return nil
}

func (e *events) types() []event.Type {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]event.Type(nil), e.got...)
}

type fixture struct {
	cat   *catalog.Store
	root  string
	rooms *rooms
	ev    *events
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(dir, "convene.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &fixture{cat: cat, root: filepath.Join(dir, "recordings"), rooms: &rooms{m: map[string]*broker.Room{}}, ev: &events{}}
}

func (f *fixture) service(t *testing.T, capacity float64, quota int64) *Service {
	t.Helper()
	s, err := New(context.Background(), Options{Root: f.root, Catalog: f.cat, Rooms: f.rooms, Events: f.ev,
		Capacity: capacity, Quota: quota, Recorder: recorder.Options{SyncEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func rtp(seq uint16, ssrc uint32) *media.Packet {
	b := make([]byte, 12+160)
	b[0], b[1] = 0x80, 0
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*160)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), b))
	return p
}

func countRecords(t *testing.T, path string) int {
	t.Helper()
	return len(records(t, path))
}

// records reads every record of an rtpdump file, each with its own copy
// of the bytes.
func records(t *testing.T, path string) []rtpdump.Packet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := rtpdump.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []rtpdump.Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		p.Data = append([]byte(nil), p.Data...)
		out = append(out, p)
	}
}

// TestStartStopListDelete: a recording of a room with one audio track
// holds every packet published while it ran; the catalog has its size,
// duration and stream; the time line has the noted events; deleting it
// frees its directory.
func TestStartStopListDelete(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, 0, 0)
	ctx := context.Background()
	room := broker.NewRoom("s_1")
	f.rooms.set("s_1", room)
	tr, err := room.Join(broker.Member{ID: "m_a", Kind: media.Audio, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx, NewRecording{Session: "s_none", Owner: Operator}); !errors.Is(err, ErrConflict) {
		t.Errorf("recording a session without a room: %v, want ErrConflict", err)
	}
	if _, err := s.Start(ctx, NewRecording{Session: "s_1", Owner: Operator, Title: string(make([]byte, MaxTitle+1))}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a long title: %v, want ErrInvalid", err)
	}
	r, err := s.Start(ctx, NewRecording{Session: "s_1", Owner: "m_chair", Title: "Weekly", Description: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "recording" || r.Owner != "m_chair" || r.Session != "s_1" || r.ID == "" {
		t.Fatalf("started %+v", r)
	}
	s.Note("s_1", recorder.Event{Kind: recorder.MemberJoined, Member: "m_a"})
	s.Note("s_2", recorder.Event{Kind: recorder.MemberJoined, Member: "m_other"})
	for i := 0; i < 100; i++ {
		tr.Publish(rtp(uint16(i), 0xabc))
	}
	time.Sleep(50 * time.Millisecond) // over a tick of the clock: a duration above 0
	if _, err := s.Stop(ctx, "r_none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stop of an unknown recording: %v", err)
	}
	got, err := s.Stop(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "finished" || got.Streams != 1 || got.SizeBytes == 0 || got.DurationMS <= 0 || got.EndedAt == nil {
		t.Errorf("stopped: %+v", got)
	}
	if _, err := s.Stop(ctx, r.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("Stop twice: %v, want ErrConflict", err)
	}
	d, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Packets != 100 || d.Files[0].SSRC != 0xabc || d.Files[0].Kind != "audio" {
		t.Fatalf("files: %+v", d.Files)
	}
	if n := countRecords(t, filepath.Join(f.root, r.ID, d.Files[0].File)); n != 100 {
		t.Errorf("the file holds %d records, want 100", n)
	}
	var joined []string
	for _, e := range d.Timeline {
		if e.Kind == recorder.MemberJoined {
			joined = append(joined, e.Member)
		}
	}
	if len(joined) != 1 || joined[0] != "m_a" {
		t.Errorf("time line members %v, want [m_a] (only this session's)", joined)
	}
	if ev := f.ev.types(); len(ev) != 2 || ev[0] != event.RecordingStarted || ev[1] != event.RecordingStopped {
		t.Errorf("events %v", ev)
	}

	title := "Weekly (final)"
	if u, err := s.Update(ctx, r.ID, &title, nil); err != nil || u.Title != title || u.Description != "budget" {
		t.Errorf("Update: %+v %v", u, err)
	}
	for q, want := range map[string]int{"final": 1, "BUDGET": 1, "nothing": 0} {
		if l, err := s.List(ctx, Filter{Query: q}); err != nil || len(l) != want {
			t.Errorf("List(%q) = %d, %v; want %d", q, len(l), err, want)
		}
	}
	if l, _ := s.List(ctx, Filter{Session: "s_2"}); len(l) != 0 {
		t.Errorf("another session lists %d", len(l))
	}

	if err := s.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.root, r.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there: %v", err)
	}
	if _, err := s.Lookup(ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup after Delete: %v", err)
	}
}

// TestAdmission: a recording is refused when its estimate would pass the
// capacity, and admitted again once another one stopped; an owner over its
// quota starts none.
func TestAdmission(t *testing.T) {
	f := newFixture(t)
	// Room for one audio-and-video recording (2.628 Mb/s), not two.
	s := f.service(t, 3e6, 0)
	ctx := context.Background()
	room := broker.NewRoom("s_1")
	f.rooms.set("s_1", room)
	room.Join(broker.Member{ID: "a", Kind: media.Audio, Sends: true})
	room.Join(broker.Member{ID: "v", Kind: media.Video, Sends: true})
	if got := Estimate(room.Tracks()); got != AudioEstimate+VideoEstimate {
		t.Errorf("Estimate = %v", got)
	}
	first, err := s.Start(ctx, NewRecording{Session: "s_1", Owner: Operator})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Start(ctx, NewRecording{Session: "s_1", Owner: Operator})
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("second recording: %v, want ErrCapacity", err)
	}
	t.Log(err)
	if _, err := s.Stop(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second, err := s.Start(ctx, NewRecording{Session: "s_1", Owner: Operator})
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	// SessionEnded stops it.
	s.SessionEnded("s_1")
	waitState(t, s, second.ID, "finished")

	// Quota: 1 byte; the operator's first recording already takes more.
	q := f.service(t, 0, 1)
	if _, err := q.Start(ctx, NewRecording{Session: "s_1", Owner: Operator}); !errors.Is(err, ErrQuota) {
		t.Errorf("over the quota: %v, want ErrQuota", err)
	}
	if r, err := q.Start(ctx, NewRecording{Session: "s_1", Owner: "m_new"}); err != nil {
		t.Errorf("another owner: %v", err)
	} else {
		q.Stop(ctx, r.ID)
	}
}

func waitState(t *testing.T, s *Service, id, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := s.Lookup(context.Background(), id)
		if err == nil && r.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("recording %s: %+v %v, want state %s", id, r, err, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRepairAtStart: a recording directory as a killed process leaves it
// (manifest "recording", a stream file cut inside a record) is repaired
// when the service opens, and the catalog marks it interrupted with its
// size, duration and stream.
func TestRepairAtStart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	room := broker.NewRoom("s_1")
	tr, _ := room.Join(broker.Member{ID: "a", Kind: media.Audio, Sends: true})
	id := "r_0123456789abcdef"
	dir := filepath.Join(f.root, id)
	// A recording whose process "dies": the files as they were while it ran.
	rec, err := recorder.Start(room, filepath.Join(t.TempDir(), "live"), recorder.Options{SyncEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		tr.Publish(rtp(uint16(i), 7))
	}
	time.Sleep(500 * time.Millisecond) // two flushes
	if err := os.CopyFS(dir, os.DirFS(rec.Dir())); err != nil {
		t.Fatal(err)
	}
	rec.Stop()
	files, _ := filepath.Glob(filepath.Join(dir, "*.rtpdump"))
	if len(files) != 1 {
		t.Fatalf("stream files %v", files)
	}
	fi, _ := os.Stat(files[0])
	os.Truncate(files[0], fi.Size()-5) // a torn last record
	if err := f.cat.CreateRecording(ctx, catalog.Recording{ID: id, SessionID: "s_1", Owner: Operator,
		State: "recording", StartedAt: rec.Started(), Dir: dir}); err != nil {
		t.Fatal(err)
	}

	s := f.service(t, 0, 0)
	r, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "interrupted" || r.Streams != 1 || r.SizeBytes == 0 || r.EndedAt == nil {
		t.Errorf("after repair: %+v", r.Recording)
	}
	if len(r.Files) != 1 || r.Files[0].Packets != 49 {
		t.Errorf("files %+v, want one of 49 packets (the torn 50th cut)", r.Files)
	}
	if n := countRecords(t, files[0]); n != 49 {
		t.Errorf("%d records readable, want 49", n)
	}
}

// TestProbeDisk: the probe writes, measures and leaves nothing behind.
func TestProbeDisk(t *testing.T) {
	dir := t.TempDir()
	bps, err := ProbeDisk(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if bps <= 0 {
		t.Errorf("probe: %v bits/s", bps)
	}
	t.Logf("disk takes %.0f Mb/s", bps/1e6)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the probe left %d files", len(ents))
	}
}
