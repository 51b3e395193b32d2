package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRecordingCRUD(t *testing.T) { forDrivers(t, testRecordingCRUD) }

func testRecordingCRUD(t *testing.T, drv backend) {
	ctx := context.Background()
	s, dsn := newStore(t, drv)

	a := Recording{ID: "r_a", SessionID: "s_1", Title: "Board call", Description: "Q3 budget, 100% approved",
		Owner: "operator", State: "recording", StartedAt: ms(0), Dir: "/data/recordings/r_a"}
	b := Recording{ID: "r_b", SessionID: "s_1", Title: "Stand-up", Description: "daily_notes",
		Owner: "m_chair", State: "recording", StartedAt: ms(time.Minute), Dir: "/data/recordings/r_b"}
	c := Recording{ID: "r_c", SessionID: "s_2", Title: "Other", Owner: "m_chair", State: "finished",
		StartedAt: ms(2 * time.Minute), EndedAt: ms(3 * time.Minute), Duration: time.Minute, SizeBytes: 1000,
		Streams: 2, Dir: "/data/recordings/r_c"}
	for _, r := range []Recording{a, b, c} {
		if err := s.CreateRecording(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateRecording(ctx, a); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate CreateRecording: %v, want ErrExists", err)
	}
	if err := s.CreateRecording(ctx, Recording{ID: "r_x"}); err == nil {
		t.Error("a recording without session, owner and dir was stored")
	}

	got, err := s.GetRecording(ctx, "r_c")
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionID != "s_2" || got.Title != "Other" || got.Owner != "m_chair" || got.State != "finished" ||
		got.Duration != time.Minute || got.SizeBytes != 1000 || got.Streams != 2 || got.Dir != c.Dir {
		t.Errorf("GetRecording = %+v", got)
	}
	wantTime(t, "StartedAt", got.StartedAt, c.StartedAt)
	wantTime(t, "EndedAt", got.EndedAt, c.EndedAt)
	if got, _ := s.GetRecording(ctx, "r_a"); !got.EndedAt.IsZero() {
		t.Errorf("a running recording has EndedAt %v", got.EndedAt)
	}
	if _, err := s.GetRecording(ctx, "r_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRecording missing: %v", err)
	}

	list := func(f RecordingFilter) []string {
		t.Helper()
		rs, err := s.ListRecordings(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    RecordingFilter
		want []string
	}{
		{RecordingFilter{}, []string{"r_c", "r_b", "r_a"}}, // newest first
		{RecordingFilter{SessionID: "s_1"}, []string{"r_b", "r_a"}},
		{RecordingFilter{Owner: "m_chair"}, []string{"r_c", "r_b"}},
		{RecordingFilter{State: "finished"}, []string{"r_c"}},
		{RecordingFilter{Query: "BOARD"}, []string{"r_a"}},  // title, any case
		{RecordingFilter{Query: "budget"}, []string{"r_a"}}, // description
		{RecordingFilter{Query: "100%"}, []string{"r_a"}},   // % is a character, not a wildcard
		{RecordingFilter{Query: "y_n"}, []string{"r_b"}},    // so is _
		{RecordingFilter{Query: "%"}, []string{"r_a"}},
		{RecordingFilter{Query: "_"}, []string{"r_b"}},
		{RecordingFilter{Query: "nothing"}, []string{}},
		{RecordingFilter{SessionID: "s_1", Query: "stand"}, []string{"r_b"}},
		{RecordingFilter{Limit: 1}, []string{"r_c"}},
	} {
		if got := list(tc.f); !equalStrings(got, tc.want) {
			t.Errorf("ListRecordings(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}

	if err := s.UpdateRecordingText(ctx, "r_a", "Board call (final)", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetRecording(ctx, "r_a"); got.Title != "Board call (final)" || got.Description != "" {
		t.Errorf("after UpdateRecordingText: %+v", got)
	}
	if err := s.UpdateRecordingText(ctx, "r_missing", "x", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateRecordingText missing: %v", err)
	}

	end := Recording{ID: "r_b", State: "interrupted", EndedAt: ms(90 * time.Second), Duration: 30 * time.Second,
		SizeBytes: 4096, Streams: 3, Error: ""}
	if err := s.EndRecording(ctx, end); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RecordingBytes(ctx, "m_chair"); err != nil || n != 5096 {
		t.Errorf("RecordingBytes(m_chair) = %d, %v; want 5096", n, err)
	}
	if n, err := s.RecordingBytes(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("RecordingBytes(nobody) = %d, %v", n, err)
	}
	if err := s.EndRecording(ctx, Recording{ID: "r_missing", State: "failed"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("EndRecording missing: %v", err)
	}

	// What was stored survives a restart.
	s.Close()
	s2 := openTest(t, drv, dsn)
	defer s2.Close()
	got, err = s2.GetRecording(ctx, "r_b")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "interrupted" || got.Duration != 30*time.Second || got.SizeBytes != 4096 || got.Streams != 3 {
		t.Errorf("after restart: %+v", got)
	}
	wantTime(t, "EndedAt", got.EndedAt, end.EndedAt)
	if err := s2.DeleteRecording(ctx, "r_b"); err != nil {
		t.Fatal(err)
	}
	if err := s2.DeleteRecording(ctx, "r_b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteRecording twice: %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
