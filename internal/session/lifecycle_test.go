package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/floor"
)

func waitState(t *testing.T, svc *Service, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := svc.Get(context.Background(), id)
		if err == nil && s.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is %q (%v), want %s", id, s.State, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTransitionsThroughService(t *testing.T) {
	ctx := context.Background()
	svc, ev := newService(t, filepath.Join(t.TempDir(), "c.db"))
	s, _ := svc.Create(ctx, "t")
	l, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47030", Kind: "audio"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Transition(ctx, s.ID, ActionCancel); !errors.Is(err, ErrConflict) {
		t.Fatalf("cancel active: %v", err)
	}
	var se *StateError
	if _, err := svc.Transition(ctx, s.ID, ActionActivate); !errors.As(err, &se) || se.State != StateActivated {
		t.Fatalf("activate active: %v", err)
	}
	got, err := svc.Transition(ctx, s.ID, ActionDeactivate)
	if err != nil || got.State != StateDeactivated || len(got.Links) != 0 {
		t.Fatalf("deactivate: %+v %v", got, err)
	}
	if _, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47032", Kind: "audio"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("link on deactivated session: %v", err)
	}
	got, err = svc.Transition(ctx, s.ID, ActionActivate)
	if err != nil || got.State != StateActivated || len(got.Links) != 1 || got.Links[0].ID != l.ID {
		t.Fatalf("reactivate brings the link back: %+v %v", got, err)
	}
	if _, err := svc.Transition(ctx, s.ID, "explode"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown action: %v", err)
	}
	if _, err := svc.End(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Transition(ctx, s.ID, ActionActivate); !errors.As(err, &se) || se.State != StateFinished {
		t.Fatalf("activate finished: %v", err)
	}
	want := []string{"created", "activated", "link.added", "deactivated", "activated", "finished"}
	if len(ev.got) != len(want) {
		t.Fatalf("events %v", ev.got)
	}
	for i := range want {
		if ev.got[i] != want[i] {
			t.Fatalf("events %v, want %v", ev.got, want)
		}
	}
}

// A scheduled session is activated by the scheduler, also across a
// restart, and finished at its end time; an active session is active again
// after a restart; a created one can be canceled.
func TestScheduleAndRestart(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	svc, _ := newService(t, dsn)
	now := time.Now()
	sched, err := svc.CreateSession(ctx, NewSession{Name: "later", StartAt: now.Add(time.Second), EndAt: now.Add(2500 * time.Millisecond)})
	if err != nil || sched.State != StateCreated || sched.StartAt == nil {
		t.Fatalf("scheduled: %+v %v", sched, err)
	}
	active, _ := svc.Create(ctx, "now")
	m, err := svc.Join(ctx, active.ID, "ann", floor.RoleChair)
	if err != nil {
		t.Fatal(err)
	}
	canceled, _ := svc.CreateSession(ctx, NewSession{Name: "c", StartAt: now.Add(time.Hour)})
	if got, err := svc.End(ctx, canceled.ID); err != nil || got.State != StateCanceled {
		t.Fatalf("end of a created session cancels it: %+v %v", got, err)
	}
	if _, err := svc.CreateSession(ctx, NewSession{EndAt: now.Add(-time.Second)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("end in the past: %v", err)
	}
	svc.Drain() // the node stops before the start time

	svc2, _ := newService(t, dsn)
	if err := svc2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc2.Drain)
	if got, _ := svc2.Get(ctx, active.ID); got.State != StateActivated || got.Members != 1 {
		t.Fatalf("active session after restart: %+v", got)
	}
	if ms, _ := svc2.Members(ctx, active.ID); len(ms) != 1 || ms[0].ID != m.ID || ms[0].Role != floor.RoleChair {
		t.Fatalf("members after restart: %+v", ms)
	}
	if svc2.roomOf(active.ID) == nil {
		t.Fatal("no room after restart")
	}
	waitState(t, svc2, sched.ID, StateActivated)
	if svc2.roomOf(sched.ID) == nil {
		t.Fatal("scheduled session activated without its room")
	}
	waitState(t, svc2, sched.ID, StateFinished)
	if got, _ := svc2.Get(ctx, canceled.ID); got.State != StateCanceled {
		t.Fatalf("canceled: %+v", got)
	}
}
