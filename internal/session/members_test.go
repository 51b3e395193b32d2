package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/media"
)

type tap struct{ n int }

func (t *tap) Deliver(p *media.Packet, _ *broker.Track) { t.n++; p.Release() }

func rtpPacket() *media.Packet {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), []byte{0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}))
	return p
}

func TestMembersRolesSubgroupsAndGates(t *testing.T) {
	ctx := context.Background()
	svc, ev := newService(t, filepath.Join(t.TempDir(), "c.db"))
	s, _ := svc.Create(ctx, "m")
	chair, _ := svc.Join(ctx, s.ID, "c", floor.RoleChair)
	alice, _ := svc.Join(ctx, s.ID, "a", floor.RoleParticipant)
	lis, _ := svc.Join(ctx, s.ID, "l", floor.RoleListener)
	if _, err := svc.Join(ctx, s.ID, "x", "king"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	ll, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47040", Kind: "audio", Member: lis.ID})
	if err != nil || ll.Direction != "recvonly" || ll.Member != lis.ID {
		t.Fatalf("listener link: %+v %v", ll, err)
	}
	la, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47042", Kind: "audio", Member: alice.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47044", Kind: "audio", Member: "m_nope"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("link for unknown member: %v", err)
	}
	room := svc.roomOf(s.ID)
	probe := &tap{}
	if _, err := room.Join(broker.Member{ID: "probe", Kind: media.Audio, Receives: true, Sink: probe}); err != nil {
		t.Fatal(err)
	}
	var aTrack *broker.Track
	for _, tr := range room.Tracks() {
		if tr.Publisher() == la.ID {
			aTrack = tr
		}
	}
	if aTrack == nil || aTrack.Gated() {
		t.Fatalf("alice's track %v: floor control is off, must be open", aTrack)
	}
	aTrack.Publish(rtpPacket())
	if probe.n != 1 {
		t.Fatalf("probe got %d", probe.n)
	}
	// Floor control on: alice holds nothing, her media is dropped and counted.
	fl, _ := svc.Floors(ctx, s.ID)
	if _, err := fl.SetStyle(chair.ID, "audio", floor.Settings{Style: floor.StyleFloorControl, Auto: true}); err != nil {
		t.Fatal(err)
	}
	aTrack.Publish(rtpPacket())
	got, _ := svc.Get(ctx, s.ID)
	var stats LinkStats
	for _, l := range got.Links {
		if l.ID == la.ID {
			stats = l.Stats
		}
	}
	if probe.n != 1 || stats.Dropped[DropFloor] != 1 {
		t.Fatalf("gated: probe %d, dropped %v", probe.n, stats.Dropped)
	}
	if r, _ := fl.Request(alice.ID, "audio"); r.Status != floor.Granted {
		t.Fatalf("request: %+v", r)
	}
	aTrack.Publish(rtpPacket())
	if probe.n != 2 {
		t.Fatalf("granted media not forwarded: %d", probe.n)
	}
	// A subgroup: alice alone with the chair; the probe (main session) no longer hears her.
	g, err := svc.CreateSubgroup(ctx, s.ID, "side", chair.ID, []string{alice.ID, chair.ID})
	if err != nil || len(g.Members) != 2 {
		t.Fatalf("subgroup %+v %v", g, err)
	}
	aTrack.Publish(rtpPacket())
	if probe.n != 2 {
		t.Fatal("subgroup media reached the main session")
	}
	if err := svc.DeleteSubgroup(ctx, s.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	aTrack.Publish(rtpPacket())
	if probe.n != 3 {
		t.Fatalf("back in the main session: %d", probe.n)
	}
	// Leaving closes the member's links and passes on the token.
	if err := svc.Leave(ctx, s.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	if fl.Holds(alice.ID, "audio") {
		t.Fatal("left member holds the floor")
	}
	if m, _ := svc.GetMember(ctx, s.ID, lis.ID); len(m.Links) != 1 {
		t.Fatalf("listener links %+v", m)
	}
	if got, _ := svc.Get(ctx, s.ID); len(got.Links) != 1 || got.Members != 2 {
		t.Fatalf("after leave: %d links %d members", len(got.Links), got.Members)
	}
	seen := map[string]bool{}
	for _, e := range ev.got {
		seen[e] = true
	}
	for _, want := range []string{"member.joined", "member.left", "member.updated", "subgroup.created", "subgroup.deleted", "floor.request", "floor.style"} {
		if !seen[want] {
			t.Errorf("no %s event in %v", want, ev.got)
		}
	}
}

// TestSetMuted: a member's own mute closes its tracks' gates whatever the
// floor says, is announced, and unmuting hands the gate back to the floor.
func TestSetMuted(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t, filepath.Join(t.TempDir(), "c.db"))
	s, _ := svc.Create(ctx, "m")
	chair, _ := svc.Join(ctx, s.ID, "c", floor.RoleChair)
	alice, _ := svc.Join(ctx, s.ID, "a", floor.RoleParticipant)
	la, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47052", Kind: "audio", Member: alice.ID})
	if err != nil {
		t.Fatal(err)
	}
	var tr *broker.Track
	for _, x := range svc.roomOf(s.ID).Tracks() {
		if x.Publisher() == la.ID {
			tr = x
		}
	}
	if err := svc.SetMuted(ctx, s.ID, alice.ID, "audio", true); err != nil || !tr.Gated() {
		t.Fatalf("muted: gated %v, %v", tr.Gated(), err)
	}
	if m, _ := svc.Muted(ctx, s.ID, alice.ID, "audio"); !m {
		t.Fatal("Muted says no")
	}
	if err := svc.SetMuted(ctx, s.ID, alice.ID, "audio", false); err != nil || tr.Gated() {
		t.Fatalf("unmuted without floor control: gated %v, %v", tr.Gated(), err)
	}
	// Under floor control without the floor, unmuting leaves it gated.
	fl, _ := svc.Floors(ctx, s.ID)
	if _, err := fl.SetStyle(chair.ID, "audio", floor.Settings{Style: floor.StyleFloorControl}); err != nil {
		t.Fatal(err)
	}
	_ = svc.SetMuted(ctx, s.ID, alice.ID, "audio", true)
	_ = svc.SetMuted(ctx, s.ID, alice.ID, "audio", false)
	if !tr.Gated() {
		t.Fatal("unmuting opened a gate the floor keeps closed")
	}
	if err := svc.SetMuted(ctx, s.ID, "m_nope", "audio", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown member: %v", err)
	}
}
