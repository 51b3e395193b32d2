package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The tables the session and link tests do not reach — SIP accounts and
// bindings, members and subgroups, join tokens, floors, PINs, policed
// links — on both drivers, each statement at least once.

func TestSIPTables(t *testing.T) { forDrivers(t, testSIPTables) }

func testSIPTables(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
	alice := SIPUser{Username: "alice", Realm: "convene", HA1MD5: "m", HA1SHA256: "s", CreatedAt: ms(0)}
	if err := s.AddSIPUser(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSIPUser(ctx, alice); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate AddSIPUser: %v, want ErrExists", err)
	}
	if err := s.AddSIPUser(ctx, SIPUser{Username: "bob", Realm: "convene"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SIPUser(ctx, "alice")
	if err != nil || got.HA1MD5 != "m" || got.HA1SHA256 != "s" || got.Realm != "convene" {
		t.Errorf("SIPUser = %+v, %v", got, err)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, alice.CreatedAt)
	if _, err := s.SIPUser(ctx, "carol"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SIPUser missing: %v", err)
	}
	if us, err := s.SIPUsers(ctx); err != nil || len(us) != 2 || us[0].Username != "alice" {
		t.Errorf("SIPUsers = %+v, %v", us, err)
	}

	now := ms(time.Hour)
	bind := func(user, contact string, cseq uint32, expires time.Duration) SIPBinding {
		return SIPBinding{Username: user, Contact: contact, CallID: "c-" + contact, CSeq: cseq,
			ExpiresAt: now.Add(expires), Source: "udp/192.0.2.1:5060", NAT: true, UserAgent: "ua", UpdatedAt: now}
	}
	// An insert, a binding of an unknown user (skipped), then an update
	// of the first and a removal.
	if err := s.SaveSIPBindings(ctx, []SIPBinding{
		bind("alice", "sip:a@1", 1, time.Minute), bind("alice", "sip:a@2", 1, time.Minute),
		bind("bob", "sip:b@1", 1, -time.Minute), bind("ghost", "sip:g@1", 1, time.Minute),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSIPBindings(ctx, []SIPBinding{bind("alice", "sip:a@1", 4294967295, 2*time.Minute)},
		[]SIPBindingKey{{Username: "alice", Contact: "sip:a@2"}}); err != nil {
		t.Fatal(err)
	}
	bs, err := s.SIPBindings(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Contact != "sip:a@1" || bs[0].CSeq != 4294967295 || !bs[0].NAT || bs[0].Source != "udp/192.0.2.1:5060" {
		t.Errorf("SIPBindings = %+v", bs)
	}
	wantTime(t, "ExpiresAt", bs[0].ExpiresAt, now.Add(2*time.Minute))
	if err := s.PurgeSIPBindings(ctx, now); err != nil {
		t.Fatal(err)
	}
	if bs, _ := s.SIPBindings(ctx, now.Add(-time.Hour)); len(bs) != 1 {
		t.Errorf("after purge: %+v, want alice's one live binding", bs)
	}
	if err := s.DeleteSIPUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSIPUser(ctx, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteSIPUser twice: %v", err)
	}
	if bs, _ := s.SIPBindings(ctx, time.Time{}); len(bs) != 0 {
		t.Errorf("bindings of a deleted user: %+v", bs)
	}
}

func TestSessionTables(t *testing.T) { forDrivers(t, testSessionTables) }

func testSessionTables(t *testing.T, b backend) {
	ctx := context.Background()
	s, _ := newStore(t, b)
	if err := s.CreateSession(ctx, Session{ID: "s_1", State: "created", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}

	// Members and subgroups.
	if err := s.AddMember(ctx, Member{ID: "m_ghost", SessionID: "s_none", Role: "guest"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddMember to a missing session: %v, want ErrNotFound", err)
	}
	for i, id := range []string{"m_1", "m_2"} {
		if err := s.AddMember(ctx, Member{ID: id, SessionID: "s_1", Name: id, Role: "participant",
			JoinedAt: ms(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddSubgroup(ctx, Subgroup{ID: "g_1", SessionID: "s_1", Name: "breakout", CreatedBy: "m_1", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSubgroup(ctx, Subgroup{ID: "g_x", SessionID: "s_none"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddSubgroup to a missing session: %v", err)
	}
	if err := s.SetMemberSubgroup(ctx, "m_2", "g_1"); err != nil {
		t.Fatal(err)
	}
	if gs, err := s.ListSubgroups(ctx, "s_1"); err != nil || len(gs) != 1 || gs[0].CreatedBy != "m_1" {
		t.Errorf("ListSubgroups = %+v, %v", gs, err)
	}
	ms1, err := s.ListMembers(ctx, "s_1")
	if err != nil || len(ms1) != 2 || ms1[1].Subgroup != "g_1" {
		t.Errorf("ListMembers = %+v, %v", ms1, err)
	}
	if err := s.RemoveSubgroup(ctx, "g_1"); err != nil {
		t.Fatal(err)
	}
	if ms1, _ := s.ListMembers(ctx, "s_1"); len(ms1) != 2 || ms1[1].Subgroup != "" {
		t.Errorf("after RemoveSubgroup: %+v, want m_2 back in the main session", ms1)
	}

	// A member's link, policed; removing the member takes the mapping.
	if err := s.AddLink(ctx, Link{ID: "l_1", SessionID: "s_1", Type: "rtp", Kind: "audio", Direction: "sendrecv",
		Remote: "192.0.2.1:4000", Mix: "PCMU", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLinkMember(ctx, "l_1", "m_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLinkPoliced(ctx, "l_1"); err != nil {
		t.Fatal(err)
	}
	if m, err := s.LinkMember(ctx, "l_1"); err != nil || m != "m_1" {
		t.Errorf("LinkMember = %q, %v", m, err)
	}
	if p, err := s.LinkPoliced(ctx, "l_1"); err != nil || !p {
		t.Errorf("LinkPoliced = %v, %v", p, err)
	}
	if l, err := s.GetLink(ctx, "l_1"); err != nil || l.Mix != "PCMU" {
		t.Errorf("GetLink = %+v, %v", l, err)
	}
	if err := s.RemoveMember(ctx, "m_1"); err != nil {
		t.Fatal(err)
	}
	if m, err := s.LinkMember(ctx, "l_1"); err != nil || m != "" {
		t.Errorf("LinkMember after RemoveMember = %q, %v", m, err)
	}

	// Join tokens: counted, used up, revoked.
	tok := JoinToken{ID: "t_1", SessionID: "s_1", Role: "guest", MaxUses: 1, CreatedAt: ms(0), ExpiresAt: ms(time.Hour)}
	if err := s.AddJoinToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJoinToken(ctx, JoinToken{ID: "t_x", SessionID: "s_none"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddJoinToken to a missing session: %v", err)
	}
	if err := s.UseJoinToken(ctx, "s_1", "t_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UseJoinToken(ctx, "s_1", "t_1"); !errors.Is(err, ErrUsedUp) {
		t.Errorf("second use: %v, want ErrUsedUp", err)
	}
	if err := s.RevokeJoinToken(ctx, "s_1", "t_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UseJoinToken(ctx, "s_1", "t_1"); !errors.Is(err, ErrRevoked) {
		t.Errorf("revoked: %v, want ErrRevoked", err)
	}
	if err := s.UseJoinToken(ctx, "s_1", "t_none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown token: %v, want ErrNotFound", err)
	}
	if ts, err := s.JoinTokens(ctx, "s_1"); err != nil || len(ts) != 1 || !ts[0].Revoked || ts[0].Uses != 1 {
		t.Errorf("JoinTokens = %+v, %v", ts, err)
	}

	// Floor states: upserted by floor.
	for _, st := range []string{`{"holder":"m_1"}`, `{"holder":"m_2"}`} {
		if err := s.SaveFloorState(ctx, "s_1", "audio", []byte(st)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveFloorState(ctx, "s_none", "audio", []byte("{}")); !errors.Is(err, ErrNotFound) {
		t.Errorf("SaveFloorState for a missing session: %v", err)
	}
	if fs, err := s.FloorStates(ctx, "s_1"); err != nil || len(fs) != 1 || string(fs["audio"]) != `{"holder":"m_2"}` {
		t.Errorf("FloorStates = %q, %v", fs, err)
	}

	// Dial-in PINs: set, replaced, deleted.
	if err := s.SetSessionPIN(ctx, "s_1", "m1", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSessionPIN(ctx, "s_1", "m2", "s2"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSessionPIN(ctx, "s_none", "m", "s"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetSessionPIN for a missing session: %v", err)
	}
	if m, sh, found, err := s.SessionPIN(ctx, "s_1"); err != nil || !found || m != "m2" || sh != "s2" {
		t.Errorf("SessionPIN = %q %q %v %v", m, sh, found, err)
	}
	if err := s.DeleteSessionPIN(ctx, "s_1"); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := s.SessionPIN(ctx, "s_1"); err != nil || found {
		t.Errorf("SessionPIN after delete: found=%v %v", found, err)
	}
}
