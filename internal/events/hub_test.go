package events

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/event"
)

type natsRec struct {
	mu   sync.Mutex
	seqs []uint64
}

func (n *natsRec) SessionEventSeq(_ string, _ event.Type, seq uint64, _ any) error {
	n.mu.Lock()
	n.seqs = append(n.seqs, seq)
	n.mu.Unlock()
	return nil
}

func TestResumeWithoutGapOrRepeat(t *testing.T) {
	nr := &natsRec{}
	h := New(Options{Bus: nr, Keep: 4, Now: func() time.Time { return time.Unix(100, 0) }})
	base := uint64(100) << 20
	for i := 0; i < 3; i++ {
		h.SessionEvent("s", event.LinkAdded, map[string]int{"i": i})
	}
	h.SessionEvent("other", event.LinkAdded, nil)
	back, sub, res := h.Subscribe("s", int64(base+1))
	if len(back) != 2 || back[0].Seq != base+2 || back[1].Seq != base+3 || res.Gap || res.Last != base+3 {
		t.Fatalf("backlog %+v res %+v", back, res)
	}
	var d map[string]int
	json.Unmarshal(back[1].Data, &d)
	if d["i"] != 2 {
		t.Fatalf("data %s", back[1].Data)
	}
	h.SessionEvent("s", event.LinkRemoved, nil)
	if ev := <-sub.C(); ev.Seq != base+4 || ev.Type != event.LinkRemoved.String() {
		t.Fatalf("live %+v", ev)
	}
	h.Unsubscribe(sub)
	if _, ok := <-sub.C(); ok {
		t.Fatal("channel open after unsubscribe")
	}
	// Two more: the log (4) has lost base+1 and base+2.
	h.SessionEvent("s", event.MemberJoined, nil)
	h.SessionEvent("s", event.MemberJoined, nil)
	back, sub2, res := h.Subscribe("s", int64(base+1))
	defer h.Unsubscribe(sub2)
	if !res.Gap || len(back) != 4 || back[0].Seq != base+3 {
		t.Fatalf("after overflow: %+v %+v", back, res)
	}
	if _, _, res := h.Subscribe("s", int64(base+2)); res.Gap {
		t.Fatal("gap reported though base+3 is the oldest kept")
	}
	if back, _, res := h.Subscribe("s", -1); back != nil || res.Last != base+6 {
		t.Fatalf("live only: %v %+v", back, res)
	}
	if len(nr.seqs) != 7 {
		t.Fatalf("nats got %v", nr.seqs)
	}
}

func TestSlowSubscriberIsCut(t *testing.T) {
	h := New(Options{Buffer: 2})
	_, sub, _ := h.Subscribe("s", -1)
	for i := 0; i < 3; i++ {
		h.SessionEvent("s", event.LinkAdded, nil)
	}
	n := 0
	for range sub.C() {
		n++
	}
	if n != 2 || sub.Reason() == "" {
		t.Fatalf("got %d, reason %q", n, sub.Reason())
	}
	h.Unsubscribe(sub) // no double close
}

func TestEndedLogsAreBounded(t *testing.T) {
	h := New(Options{Ended: 2})
	for _, id := range []string{"a", "b", "c"} {
		h.SessionEvent(id, event.Created, nil)
		h.SessionEvent(id, event.Finished, nil)
	}
	h.mu.Lock()
	_, a := h.logs["a"]
	_, c := h.logs["c"]
	n := len(h.logs)
	h.mu.Unlock()
	if a || !c || n != 2 {
		t.Fatalf("logs kept: a=%v c=%v n=%d", a, c, n)
	}
	back, _, _ := h.Subscribe("c", 0)
	if len(back) != 2 || back[1].Type != "finished" {
		t.Fatalf("ended session's log: %+v", back)
	}
}
