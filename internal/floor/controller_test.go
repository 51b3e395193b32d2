package floor

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/event"
)

type recorder struct {
	mu     sync.Mutex
	events []Request
	gates  map[string]map[string]bool
	on     map[string]bool
}

func (r *recorder) opts() Options {
	r.gates, r.on = map[string]map[string]bool{}, map[string]bool{}
	return Options{
		Emit: func(typ event.Type, data any) {
			if q, ok := data.(Request); ok {
				r.events = append(r.events, q)
			}
		},
		Gate: func(f string, enforced bool, hs map[string]bool) { r.on[f], r.gates[f] = enforced, hs },
	}
}

func mustStyle(t *testing.T, c *Controller, floor string, s Settings) {
	t.Helper()
	if _, err := c.SetStyle("", floor, s); err != nil {
		t.Fatal(err)
	}
}

func newCtl(t *testing.T, members ...string) (*Controller, *recorder) {
	rec := &recorder{}
	c := New(rec.opts())
	t.Cleanup(c.Close)
	for _, m := range members {
		role := RoleParticipant
		switch m[0] {
		case 'c':
			role = RoleChair
		case 'l':
			role = RoleListener
		}
		c.AddMember(m, role, "")
	}
	return c, rec
}

func TestFloorControlFIFO(t *testing.T) {
	c, rec := newCtl(t, "a", "b", "d", "l")
	if _, err := c.Request("a", "audio"); !errors.Is(err, ErrConflict) {
		t.Fatalf("request with style none: %v", err)
	}
	mustStyle(t, c, "audio", Settings{Style: StyleFloorControl, Auto: true})
	ra, _ := c.Request("a", "audio")
	rb, _ := c.Request("b", "audio")
	rd, _ := c.Request("d", "audio")
	rl, _ := c.Request("l", "audio")
	if ra.Status != Granted || rb.Status != Accepted || rb.Position != 1 || rd.Position != 2 || rl.Status != Denied {
		t.Fatalf("a %+v b %+v d %+v l %+v", ra, rb, rd, rl)
	}
	if !rec.on["audio"] || !rec.gates["audio"]["a"] || rec.gates["audio"]["b"] {
		t.Fatalf("gate %v %v", rec.on, rec.gates)
	}
	// b was told who holds the floor when it asked: the async notice.
	var notice Request
	for _, e := range rec.events {
		if e.ID == rb.ID && notice.ID == "" {
			notice = e // its first event: the request, queued
		}
	}
	if notice.Status != Accepted || notice.Position != 1 {
		t.Fatalf("b's first event %+v", notice)
	}
	if len(notice.Holders) != 1 || notice.Holders[0] != "a" {
		t.Fatalf("holders notified: %+v", notice)
	}
	if _, err := c.Release("b", "audio"); !errors.Is(err, ErrConflict) {
		t.Fatalf("release by non-holder: %v", err)
	}
	if _, err := c.Release("a", "audio"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetRequest(rb.ID); got.Status != Granted {
		t.Fatalf("b after release: %+v", got)
	}
	if got, _ := c.GetRequest(rd.ID); got.Position != 1 {
		t.Fatalf("d position: %+v", got)
	}
	if _, err := c.Cancel("d", rd.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Replicate("b", "audio", "a"); !errors.Is(err, ErrConflict) {
		t.Fatalf("replicate under floor control: %v", err)
	}
	// Transfer, then delete by the holder: token goes back to the floor.
	if r, err := c.Transfer("b", "audio", "a"); err != nil || r.Status != Granted {
		t.Fatalf("transfer: %+v %v", r, err)
	}
	st, _ := c.State("audio")
	if len(st.Tokens) != 1 || st.Tokens[0].Holder != "a" {
		t.Fatalf("tokens %+v", st.Tokens)
	}
	if err := c.Delete("b", "audio", st.Tokens[0].ID); !errors.Is(err, ErrForbidden) {
		t.Fatalf("delete by non-holder: %v", err)
	}
	if err := c.Delete("a", "audio", st.Tokens[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("", "audio", st.Tokens[0].ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete free token: %v", err)
	}
	if st, _ := c.State("audio"); len(st.Tokens) != 1 || st.Tokens[0].Holder != "" {
		t.Fatalf("token lost: %+v", st.Tokens)
	}
}

func TestChairGranted(t *testing.T) {
	c, _ := newCtl(t, "c1", "a", "b")
	mustStyle(t, c, "audio", Settings{Style: StyleFloorControl})
	ra, _ := c.Request("a", "audio")
	if ra.Status != Pending {
		t.Fatalf("without auto a request waits for the chair: %+v", ra)
	}
	if _, err := c.Grant("b", ra.ID); !errors.Is(err, ErrForbidden) {
		t.Fatalf("grant by participant: %v", err)
	}
	if r, err := c.Grant("c1", ra.ID); err != nil || r.Status != Granted {
		t.Fatalf("grant: %+v %v", r, err)
	}
	rb, _ := c.Request("b", "audio")
	if r, _ := c.Grant("c1", rb.ID); r.Status != Accepted || r.Position != 1 {
		t.Fatalf("grant while held: %+v", r)
	}
	if _, err := c.Grant("c1", rb.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("second grant while held: %v", err)
	}
	c.Release("a", "audio")
	if r, _ := c.GetRequest(rb.ID); r.Status != Granted {
		t.Fatalf("accepted request not granted on release: %+v", r)
	}
	rc, _ := c.Request("a", "audio")
	if r, err := c.Deny("c1", rc.ID); err != nil || r.Status != Denied {
		t.Fatalf("deny: %+v %v", r, err)
	}
}

func TestBrainstormingAndDistribute(t *testing.T) {
	c, rec := newCtl(t, "c1", "a", "l")
	mustStyle(t, c, "video", Settings{Style: StyleBrainstorming})
	if hs := rec.gates["video"]; !hs["c1"] || !hs["a"] || hs["l"] {
		t.Fatalf("brainstorming holders %v", hs)
	}
	c.AddMember("b", RoleParticipant, "")
	if !c.Holds("b", "video") {
		t.Fatal("late joiner has no replica")
	}
	c.Release("b", "video")
	if _, err := c.Distribute("c1", "video", nil); err != nil || !c.Holds("b", "video") {
		t.Fatalf("distribute: %v", err)
	}
	if _, err := c.Distribute("a", "video", nil); !errors.Is(err, ErrForbidden) {
		t.Fatalf("distribute by participant: %v", err)
	}
	if _, err := c.Replicate("a", "video", "l"); !errors.Is(err, ErrConflict) {
		t.Fatalf("replica to listener: %v", err)
	}
}

func TestChalkboardPhases(t *testing.T) {
	c, rec := newCtl(t, "c1", "a", "b")
	mustStyle(t, c, "audio", Settings{Style: StyleChalkboard})
	if r, _ := c.Request("c1", "audio"); r.Status != Granted {
		t.Fatalf("speaker: %+v", r)
	}
	ra, _ := c.Request("a", "audio")
	if ra.Status != Accepted {
		t.Fatalf("questioner in phase 1: %+v", ra)
	}
	if _, err := c.Replicate("c1", "audio", "b"); !errors.Is(err, ErrConflict) {
		t.Fatalf("replicate in phase 1: %v", err)
	}
	if st, err := c.Advance("c1", "audio"); err != nil || st.Phase != 2 {
		t.Fatalf("advance: %+v %v", st, err)
	}
	if hs := rec.gates["audio"]; !hs["c1"] || !hs["a"] || hs["b"] {
		t.Fatalf("phase 2 holders %v", hs)
	}
	if r, _ := c.Request("b", "audio"); r.Status != Granted || !r.Replica {
		t.Fatalf("phase 2 request: %+v", r)
	}
	c.Advance("c1", "audio")
	if hs := rec.gates["audio"]; !hs["c1"] || len(hs) != 1 {
		t.Fatalf("replicas survived the phase: %v", hs)
	}
}

func TestDiscussionGroups(t *testing.T) {
	c, rec := newCtl(t, "a", "b")
	c.AddMember("x", RoleParticipant, "g1")
	c.AddMember("y", RoleParticipant, "g1")
	mustStyle(t, c, "audio", Settings{Style: StyleDiscussion, Auto: true})
	c.Request("a", "audio")
	c.Request("x", "audio")
	ry, _ := c.Request("y", "audio")
	rb, _ := c.Request("b", "audio")
	if hs := rec.gates["audio"]; !hs["a"] || !hs["x"] || len(hs) != 2 {
		t.Fatalf("one holder per group: %v", hs)
	}
	if ry.Position != 1 || rb.Position != 1 {
		t.Fatalf("queues are per group: y %+v b %+v", ry, rb)
	}
	if _, err := c.Transfer("x", "audio", "b"); !errors.Is(err, ErrConflict) {
		t.Fatalf("transfer across groups: %v", err)
	}
	c.RemoveMember("x")
	if !c.Holds("y", "audio") {
		t.Fatal("g1's token lost when its holder left")
	}
}

func TestActivitySensing(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	packets := map[string]uint64{}
	rec := &recorder{}
	o := rec.opts()
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	o.Activity = func(m, f string) uint64 { mu.Lock(); defer mu.Unlock(); return packets[m] }
	o.Tick = time.Hour // the test drives Sense itself
	c := New(o)
	defer c.Close()
	c.AddMember("a", RoleParticipant, "")
	c.AddMember("b", RoleParticipant, "")
	if _, err := c.SetStyle("", "audio", Settings{Style: StyleActivity, Auto: true, SilenceMS: 500}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("silence 500: %v", err)
	}
	mustStyle(t, c, "audio", Settings{Style: StyleActivity, Auto: true, SilenceMS: 200})
	c.Request("a", "audio")
	rb, _ := c.Request("b", "audio")
	step := func(d time.Duration, talk bool) {
		mu.Lock()
		now = now.Add(d)
		if talk {
			packets["a"]++
		}
		mu.Unlock()
		c.Sense()
	}
	for i := 0; i < 20; i++ { // a talks every 100 ms: keeps the floor
		step(100*time.Millisecond, true)
	}
	if !c.Holds("a", "audio") {
		t.Fatal("a talking lost the floor")
	}
	step(100*time.Millisecond, false)
	if !c.Holds("a", "audio") {
		t.Fatal("100 ms of silence moved the token")
	}
	step(150*time.Millisecond, false)
	if c.Holds("a", "audio") || !c.Holds("b", "audio") {
		t.Fatal("250 ms of silence did not move the token to b")
	}
	if r, _ := c.GetRequest(rb.ID); r.Status != Granted {
		t.Fatalf("b %+v", r)
	}
}
