package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConversations(t *testing.T) { forDrivers(t, testConversations) }

func testConversations(t *testing.T, drv backend) {
	s, _ := newStore(t, drv)
	ctx := context.Background()
	if err := s.CreateSession(ctx, Session{ID: "s_1", Name: "one", State: "created", CreatedAt: ms(0)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ConversationMemberN(ctx, "s_none", "m_a", "Ada"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a member of no session: %v", err)
	}
	a, created, err := s.ConversationMemberN(ctx, "s_1", "m_a", "Ada")
	if err != nil || a != 1 || !created {
		t.Fatalf("first member: %d %v %v", a, created, err)
	}
	b, _, _ := s.ConversationMemberN(ctx, "s_1", "m_b", "Bob")
	again, createdAgain, _ := s.ConversationMemberN(ctx, "s_1", "m_a", "Ada")
	if b != 2 || again != 1 || createdAgain {
		t.Errorf("numbers %d, %d again (created %v)", b, again, createdAgain)
	}
	ms, err := s.ConversationMembers(ctx, "s_1")
	if err != nil || len(ms) != 2 || ms[1].Name != "Bob" || ms[1].N != 2 {
		t.Errorf("members %+v %v", ms, err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	for i, m := range []StoredMessage{
		{Sender: 1, Seq: 1, Flow: 1, SentAt: t0, ReceivedAt: t0, Body: []byte{1, 2, 0, 255}},
		{Sender: 2, Seq: 1, Flow: 1, SentAt: t0, ReceivedAt: t0.Add(time.Millisecond), Body: []byte("b1")},
		{Sender: 1, Seq: 2, Flow: 2, SentAt: t0, ReceivedAt: t0.Add(2 * time.Millisecond), Body: []byte("a2")},
	} {
		if err := s.AddMessage(ctx, "s_1", m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := s.AddMessage(ctx, "s_1", StoredMessage{Sender: 1, Seq: 2, Body: []byte("dup")}); !errors.Is(err, ErrExists) {
		t.Errorf("a duplicate: %v", err)
	}
	got, err := s.Messages(ctx, "s_1", 2)
	if err != nil || len(got) != 2 || string(got[0].Body) != "b1" || string(got[1].Body) != "a2" || got[1].Flow != 2 {
		t.Fatalf("the last 2: %+v %v", got, err)
	}
	all, _ := s.Messages(ctx, "s_1", 10)
	if len(all) != 3 || string(all[0].Body) != string([]byte{1, 2, 0, 255}) || !all[0].SentAt.Equal(t0) {
		t.Errorf("all: %+v", all)
	}
	last, err := s.LastSeqs(ctx, "s_1")
	if err != nil || last[1] != 2 || last[2] != 1 {
		t.Errorf("last seqs %v %v", last, err)
	}

	// Flow 4 twice from Ada and once from Bob, a flow 3 after them: the
	// last two but flow 3, and each sender's newest of flow 4.
	for i, m := range []StoredMessage{
		{Sender: 1, Seq: 3, Flow: 4, SentAt: t0, ReceivedAt: t0.Add(3 * time.Millisecond), Body: []byte("a3")},
		{Sender: 2, Seq: 2, Flow: 4, SentAt: t0, ReceivedAt: t0.Add(4 * time.Millisecond), Body: []byte("b2")},
		{Sender: 1, Seq: 4, Flow: 4, SentAt: t0, ReceivedAt: t0.Add(5 * time.Millisecond), Body: []byte("a4")},
		{Sender: 1, Seq: 5, Flow: 3, SentAt: t0, ReceivedAt: t0.Add(6 * time.Millisecond), Body: []byte("a5")},
	} {
		if err := s.AddMessage(ctx, "s_1", m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	bodies := func(ms []StoredMessage) (out []string) {
		for _, m := range ms {
			out = append(out, string(m.Body))
		}
		return out
	}
	if got, err := s.MessagesExcept(ctx, "s_1", 2, 3); err != nil || strings.Join(bodies(got), " ") != "b2 a4" {
		t.Errorf("the last 2 but flow 3: %q %v", bodies(got), err)
	}
	if got, err := s.NewestOf(ctx, "s_1", 4); err != nil || strings.Join(bodies(got), " ") != "b2 a4" {
		t.Errorf("each sender's newest of flow 4: %q %v", bodies(got), err)
	}
	if got, err := s.NewestOf(ctx, "s_1", 9); err != nil || len(got) != 0 {
		t.Errorf("the newest of a flow nobody sent: %q %v", bodies(got), err)
	}
}
