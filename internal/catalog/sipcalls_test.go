package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSIPCallMoves(t *testing.T) { forDrivers(t, testSIPCallMoves) }

// testSIPCallMoves: a call stored by node a is listed with its session and
// counted among the service nodes; the owner b takes it over only under
// its current lease and only once; it is replaced whole by a later put,
// refused over the size cap, and gone once deleted or with its session.
func testSIPCallMoves(t *testing.T, drv backend) {
	ctx := context.Background()
	s, _ := newStore(t, drv)
	if err := s.CreateSession(ctx, Session{ID: "s_1", State: "activated", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	c := SIPCall{CallID: "call-1@phone", SessionID: "s_1", Member: "m_1", Node: "a", Dialog: []byte(`{"call_id":"call-1@phone"}`)}
	if err := s.PutSIPCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSIPCall(ctx, SIPCall{CallID: "x", SessionID: "s_nope", Node: "a", Dialog: []byte("{}")}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a call of no session: %v, want ErrNotFound", err)
	}
	if err := s.PutSIPCall(ctx, SIPCall{CallID: "big", SessionID: "s_1", Node: "a", Dialog: []byte(strings.Repeat("x", MaxSIPDialog+1))}); err == nil {
		t.Error("a dialog over the cap was stored")
	}
	got, err := s.SIPCalls(ctx, "s_1")
	if err != nil || len(got) != 1 || got[0].Member != "m_1" || got[0].Node != "a" || string(got[0].Dialog) != string(c.Dialog) {
		t.Fatalf("calls: %+v %v", got, err)
	}
	if ns, err := s.ServiceNodes(ctx); err != nil || len(ns) != 1 || ns[0] != "a" {
		t.Fatalf("service nodes %v %v, want the call's a", ns, err)
	}
	if ids, err := s.NodeSIPCalls(ctx, "a"); err != nil || len(ids) != 1 || ids[0] != c.CallID {
		t.Fatalf("a's calls %v %v", ids, err)
	}
	late := ms(10 * time.Second)
	bl, ok, err := s.AcquireLease(ctx, "s_1", "b", late, 6*time.Second)
	if err != nil || !ok {
		t.Fatalf("b's lease: %v %v", ok, err)
	}
	stale := Lease{SessionID: "s_1", Node: "c", Epoch: bl.Epoch, Expires: bl.Expires}
	if err := s.MoveSIPCall(ctx, stale, late, c.CallID, "a", "c"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a node without the lease took the call: %v", err)
	}
	if err := s.MoveSIPCall(ctx, bl, late, c.CallID, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveSIPCall(ctx, bl, late, c.CallID, "a", "b"); !errors.Is(err, ErrMoved) {
		t.Fatalf("the call was taken over twice: %v", err)
	}
	if ids, err := s.NodeSIPCalls(ctx, "a"); err != nil || len(ids) != 0 {
		t.Fatalf("a's calls after the move %v %v", ids, err)
	}
	c.Node, c.Dialog = "b", []byte(`{"call_id":"call-1@phone","cseq":2}`)
	if err := s.PutSIPCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SIPCalls(ctx, "s_1"); len(got) != 1 || got[0].Node != "b" || string(got[0].Dialog) != string(c.Dialog) {
		t.Fatalf("after the move: %+v", got)
	}
	if err := s.DeleteSIPCall(ctx, c.CallID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SIPCalls(ctx, "s_1"); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
	if err := s.PutSIPCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s_1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SIPCalls(ctx, "s_1"); len(got) != 0 {
		t.Fatalf("after the session was deleted: %+v", got)
	}
}
