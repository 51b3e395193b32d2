package chat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/conversation"
)

type floors struct{ holder string }

func (f floors) MayDraw(_, member string) bool { return f.holder == "" || f.holder == member }

type notes struct {
	mu  sync.Mutex
	got []uint64
}

func (n *notes) NoteMessage(_, _ string, _ uint32, seq uint64, _ []byte) {
	n.mu.Lock()
	n.got = append(n.got, seq)
	n.mu.Unlock()
}

func setup(t *testing.T, fl Floors, nt Notes) (*Service, *catalog.Store) {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	if err := cat.CreateSession(context.Background(), catalog.Session{ID: "s_1", Name: "s", State: "activated", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return New(Options{Catalog: cat, Floors: fl, Notes: nt}, nil), cat
}

// next reads the next frame without waiting long.
func next(t *testing.T, c *Conn) (b []byte, binary bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, binary, ok := c.Next(ctx)
	if !ok {
		t.Fatal("no frame")
	}
	return b, binary
}

func hello(t *testing.T, c *Conn) Hello {
	t.Helper()
	b, bin := next(t, c)
	var h Hello
	if bin || json.Unmarshal(b, &h) != nil || h.Type != "hello" {
		t.Fatalf("first frame %q", b)
	}
	return h
}

// attach opens a member's socket, closed when the test ends, and reads
// its hello.
func attach(t *testing.T, s *Service, memberID, name string) (*Conn, Hello) {
	t.Helper()
	c, err := s.Attach(context.Background(), "s_1", memberID, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, hello(t, c)
}

func errorCode(t *testing.T, c *Conn) string {
	t.Helper()
	b, bin := next(t, c)
	var e ErrorFrame
	if bin || json.Unmarshal(b, &e) != nil || e.Type != "error" {
		t.Fatalf("want an error frame, got %q", b)
	}
	return e.Code
}

func msg(conv uint64, sender uint32, seq uint64, flow uint32, text string) []byte {
	m := conversation.Message{Conversation: conv, Flow: flow, Sender: conversation.MemberID(sender), Seq: seq,
		Sent: time.Now(), Payload: []byte(text)}
	return m.Marshal()
}

// TestRelay: members are numbered from 1; a message goes to the others
// byte for byte, is stored, and is in a later socket's history; the node
// refuses a message in another's name, another conversation's, a replay,
// an unknown flow, and the board without the data floor.
func TestRelay(t *testing.T) {
	nt := &notes{}
	s, cat := setup(t, floors{holder: "m_a"}, nt)
	ctx := context.Background()
	a, err := s.Attach(ctx, "s_1", "m_a", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ha := hello(t, a)
	if ha.Self != 1 || ha.Conversation != ID("s_1") || ha.DeltaMS != 700 || len(ha.History) != 0 || ha.Members[1].Name != "Ada" {
		t.Fatalf("Ada's hello %+v", ha)
	}
	b, _ := s.Attach(ctx, "s_1", "m_b", "Bob")
	defer b.Close()
	if hb := hello(t, b); hb.Self != 2 || hb.Members[1].ID != "m_a" || hb.Members[2].ID != "m_b" {
		t.Fatalf("Bob's hello %+v", hb)
	}
	if f, _ := next(t, a); string(f) == "" || !json.Valid(f) {
		t.Fatalf("Ada is not told of Bob: %q", f)
	}
	conv := ID("s_1")
	m1 := msg(conv, 1, 1, FlowChat, "hello")
	a.Receive(m1)
	if f, bin := next(t, b); !bin || string(f) != string(m1) {
		t.Fatalf("Bob got %q", f)
	}
	for name, bad := range map[string][]byte{
		"in Bob's name":          msg(conv, 2, 1, FlowChat, "forged"),
		"another conversation's": msg(conv+1, 1, 2, FlowChat, "x"),
		"a replay":               m1,
		"an unknown flow":        msg(conv, 1, 2, 9, "x"),
		"garbage":                {0xff, 1, 2},
		"too big":                make([]byte, MaxMessage+1),
	} {
		a.Receive(bad)
		if code := errorCode(t, a); code != "refused" {
			t.Errorf("%s: %s", name, code)
		}
	}
	b.Receive(msg(conv, 2, 1, FlowBoard, "stroke"))
	if code := errorCode(t, b); code != "floor" {
		t.Errorf("Bob draws without the floor: %s", code)
	}
	a.Receive(msg(conv, 1, 2, FlowBoard, "stroke"))
	if _, bin := next(t, b); !bin {
		t.Error("Ada's stroke did not reach Bob")
	}
	stored, _ := cat.Messages(ctx, "s_1", 10)
	if len(stored) != 2 || string(stored[0].Body) != string(m1) {
		t.Errorf("stored %d messages", len(stored))
	}
	c, _ := s.Attach(ctx, "s_1", "m_c", "Cy")
	defer c.Close()
	hc := hello(t, c)
	if len(hc.History) != 2 || hc.Last[1] != 2 || hc.History[0] != base64.StdEncoding.EncodeToString(m1) {
		t.Errorf("Cy's hello: history %d, last %v", len(hc.History), hc.Last)
	}
	if nt.got == nil || len(nt.got) != 2 {
		t.Errorf("time line got %v", nt.got)
	}
}

// TestOutOfOrder: a sender's messages may arrive out of order (a data
// channel is unordered): one that a newer one overtook is still taken and
// forwarded, a repeat of either is refused, and one more than Reorder
// below the newest is refused; the hello's last is the newest.
func TestOutOfOrder(t *testing.T) {
	s, _ := setup(t, nil, nil)
	a, _ := attach(t, s, "m_a", "Ada")
	b, _ := attach(t, s, "m_b", "Bob")
	next(t, a) // Bob numbered
	conv := ID("s_1")
	for _, seq := range []uint64{2, 1} {
		m := msg(conv, 1, seq, FlowChat, "x")
		a.Receive(m)
		if f, bin := next(t, b); !bin || string(f) != string(m) {
			t.Fatalf("seq %d: Bob got %q", seq, f)
		}
	}
	a.Receive(msg(conv, 1, 1, FlowChat, "again"))
	if code := errorCode(t, a); code != "refused" {
		t.Errorf("a repeat of seq 1: %s", code)
	}
	a.Receive(msg(conv, 1, Reorder+10, FlowChat, "far ahead"))
	next(t, b)
	a.Receive(msg(conv, 1, 3, FlowChat, "too late"))
	if code := errorCode(t, a); code != "refused" {
		t.Errorf("seq 3 after %d: %s", Reorder+10, code)
	}
	if _, h := attach(t, s, "m_c", "Cy"); h.Last[1] != Reorder+10 || len(h.History) != 3 {
		t.Errorf("Cy's hello: last %v, %d in history", h.Last, len(h.History))
	}
}

// TestRateAndSlowSocket: a socket over its burst is refused; a reader
// that takes nothing is hung up once its queue is full, not waited for.
func TestRateAndSlowSocket(t *testing.T) {
	s, _ := setup(t, nil, nil)
	fixed := time.Now()
	s.o.Now = func() time.Time { return fixed } // no refill while the burst goes in
	ctx := context.Background()
	a, _ := s.Attach(ctx, "s_1", "m_a", "Ada")
	defer a.Close()
	hello(t, a)
	slow, _ := s.Attach(ctx, "s_1", "m_b", "Bob")
	defer slow.Close()
	conv := ID("s_1")
	refused := 0
	for i := range Burst + 50 {
		a.Receive(msg(conv, 1, uint64(i+1), FlowChat, "x"))
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		b, bin, ok := a.Next(ctx)
		cancel()
		if !ok {
			break
		}
		var e ErrorFrame
		if !bin && json.Unmarshal(b, &e) == nil && e.Code == "rate_limited" {
			refused++
		}
	}
	if refused != 50 {
		t.Errorf("%d of %d messages refused for the rate, want 50", refused, Burst+50)
	}
	// Bob never reads: his queue holds MaxQueue frames, and more closes him.
	for i := range MaxQueue + 10 {
		s.o.Now = func() time.Time { return fixed.Add(time.Duration(i+1) * time.Second) } // refill the bucket
		a.Receive(msg(conv, 1, uint64(Burst+100+i), FlowChat, "x"))
	}
	select {
	case <-slow.Done():
	default:
		t.Error("a socket that reads nothing is still open after its queue filled")
	}
}

func FuzzReceive(f *testing.F) {
	f.Add(msg(ID("s_1"), 1, 1, FlowChat, "hi"))
	f.Add([]byte{1, 2, 3})
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(f.TempDir(), "c.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer cat.Close()
	cat.CreateSession(context.Background(), catalog.Session{ID: "s_1", Name: "s", State: "activated", CreatedAt: time.Now()})
	s := New(Options{Catalog: cat}, nil)
	c, err := s.Attach(context.Background(), "s_1", "m_a", "Ada")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c.Receive(b) // never panics; a refused one gets an error frame
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, _, ok := c.Next(ctx)
			cancel()
			if !ok {
				return
			}
		}
	})
}

// TestAgent: the node's agent for a phone delivers a member's lines in
// order, says where one never came, gives the phone nothing of the
// pointer or the notes, and says the phone's lines in its member's name.
func TestAgent(t *testing.T) {
	s, _ := setup(t, nil, nil)
	ctx := context.Background()
	a, _ := attach(t, s, "m_a", "Ada")
	got := make(chan string, 10)
	ag, err := s.AttachAgent(ctx, "s_1", "m_p", "Phone", func(from, text string) { got <- from + ": " + text })
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	next(t, a) // Ada is told of the phone
	conv := ID("s_1")
	a.Receive(msg(conv, 1, 1, FlowChat, "one"))
	a.Receive(msg(conv, 1, 3, FlowChat, "three")) // 2 never comes
	a.Receive(msg(conv, 1, 4, FlowPointer, `{"x":1,"y":2}`))
	a.Receive(msg(conv, 1, 5, FlowNotes, `{"t":1,"text":"notes"}`))
	a.Receive(msg(conv, 1, 6, FlowChat, "six"))
	want := []string{"Ada: one", ": 1 message(s) from Ada never arrived", "Ada: three", "Ada: six"}
	for _, w := range want {
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("the agent delivered %q, want %q", g, w)
			}
		case <-time.After(5 * time.Second): // Δ is 700 ms: the gap is declared after it
			t.Fatalf("waiting for %q", w)
		}
	}
	if err := ag.Say("hello from the phone"); err != nil {
		t.Fatal(err)
	}
	b, bin := next(t, a)
	var m conversation.Message
	if !bin || conversation.Unmarshal(b, &m) != nil || string(m.Payload) != "hello from the phone" || m.Sender != 2 || m.Seq != 1 {
		t.Fatalf("Ada got %+v", m)
	}
	if len(m.Context) != 1 || m.Context[0].Member != 1 || m.Context[0].Seq != 6 {
		t.Errorf("the phone's line depends on %+v, want Ada's 6", m.Context)
	}
}

// memRelay joins Services as the cluster's NATS would: what one publishes
// for a session reaches every other's subscribers of it.
type memRelay struct {
	mu   sync.Mutex
	subs map[*memSub]struct{}
}

type memSub struct {
	from    *memRelay
	node    int
	session string
	f       func([]byte)
}

type nodeRelay struct {
	r    *memRelay
	node int
}

func (n nodeRelay) Publish(session string, b []byte) error {
	n.r.mu.Lock()
	var fs []func([]byte)
	for s := range n.r.subs {
		if s.session == session && s.node != n.node {
			fs = append(fs, s.f)
		}
	}
	n.r.mu.Unlock()
	for _, f := range fs {
		f(append([]byte(nil), b...))
	}
	return nil
}

func (n nodeRelay) Subscribe(session string, f func([]byte)) (func(), error) {
	s := &memSub{from: n.r, node: n.node, session: session, f: f}
	n.r.mu.Lock()
	n.r.subs[s] = struct{}{}
	n.r.mu.Unlock()
	return func() { n.r.mu.Lock(); delete(n.r.subs, s); n.r.mu.Unlock() }, nil
}

// adaAndBob makes two nodes on one catalog (Services with relays ra and
// rb), attaches Ada to node A and Bob to node B, and reads their hellos.
func adaAndBob(t *testing.T, cat *catalog.Store, ra, rb Relay, catchUp ...time.Duration) (na, nb *Service, a, b *Conn, hb Hello) {
	t.Helper()
	na = New(Options{Catalog: cat, Relay: ra, CatchUp: catchUp}, nil)
	nb = New(Options{Catalog: cat, Relay: rb, CatchUp: catchUp}, nil)
	ctx := context.Background()
	a, _ = na.Attach(ctx, "s_1", "m_a", "Ada")
	t.Cleanup(a.Close)
	hello(t, a)
	b, _ = nb.Attach(ctx, "s_1", "m_b", "Bob")
	t.Cleanup(b.Close)
	return na, nb, a, b, hello(t, b)
}

// TestRelayAcrossNodes: two nodes (Services on one catalog, joined by a
// relay) carry one session's conversation: a member on each, numbered by
// the catalog; what one node accepts reaches the other's socket, and a
// member numbered on one is announced on the other; a garbled relay frame
// is dropped.
func TestRelayAcrossNodes(t *testing.T) {
	_, cat := setup(t, nil, nil)
	r := &memRelay{subs: map[*memSub]struct{}{}}
	_, nb, a, b, hb := adaAndBob(t, cat, nodeRelay{r, 1}, nodeRelay{r, 2})
	ctx := context.Background()
	if hb.Self != 2 || hb.Members[1].Name != "Ada" {
		t.Fatalf("Bob's hello on node B: %+v", hb)
	}
	if f, bin := next(t, a); bin || !strings.Contains(string(f), `"Bob"`) {
		t.Fatalf("Ada on node A is not told of Bob: %q", f)
	}
	conv := ID("s_1")
	m1 := msg(conv, 1, 1, FlowChat, "hello across")
	a.Receive(m1)
	if f, bin := next(t, b); !bin || string(f) != string(m1) {
		t.Fatalf("Bob on node B got %q", f)
	}
	m2 := msg(conv, 2, 1, FlowChat, "and back")
	b.Receive(m2)
	if f, bin := next(t, a); !bin || string(f) != string(m2) {
		t.Fatalf("Ada on node A got %q", f)
	}
	// Node B knows Ada's last: a third socket there gets it in its hello.
	c, _ := nb.Attach(ctx, "s_1", "m_c", "Cy")
	defer c.Close()
	if hc := hello(t, c); hc.Last[1] != 1 || hc.Last[2] != 1 || len(hc.History) != 2 {
		t.Errorf("Cy's hello on node B: last %v, %d in history", hc.Last, len(hc.History))
	}
	if f, bin := next(t, b); bin || !strings.Contains(string(f), `"Cy"`) {
		t.Fatalf("Bob is not told of Cy: %q", f)
	}
	if f, bin := next(t, a); bin || !strings.Contains(string(f), `"Cy"`) {
		t.Fatalf("Ada on node A is not told of Cy: %q", f)
	}
	nodeRelay{r, 9}.Publish("s_1", []byte{relayMessage, 200})
	nodeRelay{r, 9}.Publish("s_1", []byte{7})
	select {
	case <-b.out:
		t.Error("a garbled relay frame reached a socket")
	default:
	}
}

// heldRelay is a memRelay whose frames wait until flush: a relay slower
// than a member moving between nodes.
type heldRelay struct {
	nodeRelay
	mu   *sync.Mutex
	held *[]func()
}

func (h heldRelay) Publish(session string, b []byte) error {
	b = append([]byte(nil), b...)
	h.mu.Lock()
	*h.held = append(*h.held, func() { h.nodeRelay.Publish(session, b) })
	h.mu.Unlock()
	return nil
}

// TestMoveBeforeTheRelay: a member sends on node A and opens a socket on
// node B before A's relay of its messages reached B. B's hello takes each
// sender's last from the catalog: the member goes on after its own last
// message, and the history it is shown is covered by Last (a client never
// takes the relayed copies for new ones); when the relay comes, the
// member's own messages are not sent back to it, and another member on B
// gets them once.
func TestMoveBeforeTheRelay(t *testing.T) {
	_, cat := setup(t, nil, nil)
	r := &memRelay{subs: map[*memSub]struct{}{}}
	var mu sync.Mutex
	var held []func()
	_, nb, a, b, _ := adaAndBob(t, cat, heldRelay{nodeRelay{r, 1}, &mu, &held}, nodeRelay{r, 2})
	ctx := context.Background()
	conv := ID("s_1")
	a.Receive(msg(conv, 1, 1, FlowChat, "one"))
	a.Receive(msg(conv, 1, 2, FlowChat, "two"))
	a.Close()
	moved, _ := nb.Attach(ctx, "s_1", "m_a", "Ada")
	defer moved.Close()
	if h := hello(t, moved); h.Self != 1 || h.Last[1] != 2 || len(h.History) != 2 {
		t.Fatalf("Ada's hello on node B before the relay: self %d, last %v, %d in history", h.Self, h.Last, len(h.History))
	}
	mu.Lock()
	for _, f := range held {
		f()
	}
	mu.Unlock()
	for _, want := range []string{"one", "two"} {
		if f, bin := next(t, b); !bin || !strings.HasSuffix(string(f), want) {
			t.Fatalf("Bob got %q, want %q", f, want)
		}
	}
	moved.Receive(msg(conv, 1, 3, FlowChat, "three, from node B"))
	if f, bin := next(t, b); !bin || !strings.HasSuffix(string(f), "three, from node B") {
		t.Fatalf("Bob got %q after Ada moved", f)
	}
	select {
	case f := <-moved.out:
		t.Errorf("Ada on node B got %q: her own message, or a refusal", f.bin)
	default:
	}
}

// lossyRelay loses node A's frames while lose is set: a relay subscription
// that had not reached the cluster's other servers yet.
type lossyRelay struct {
	nodeRelay
	lose *bool
	mu   *sync.Mutex
}

func (l lossyRelay) Publish(session string, b []byte) error {
	l.mu.Lock()
	lose := *l.lose
	l.mu.Unlock()
	if lose {
		return nil
	}
	return l.nodeRelay.Publish(session, b)
}

// TestCatchUpMissedRelay: a message node A accepted whose relay never
// reached node B (B's subscription was still spreading) reaches B's
// sockets from the catalog, once, soon after B's hub opened; a socket
// that had it in its hello does not get it again; the relay's later
// messages come as before.
func TestCatchUpMissedRelay(t *testing.T) {
	_, cat := setup(t, nil, nil)
	r := &memRelay{subs: map[*memSub]struct{}{}}
	var mu sync.Mutex
	lose := true
	na, nb, a, b, _ := adaAndBob(t, cat, lossyRelay{nodeRelay{r, 1}, &lose, &mu}, nodeRelay{r, 2},
		300*time.Millisecond, 600*time.Millisecond)
	next(t, a) // Bob's member frame
	conv := ID("s_1")
	lost := msg(conv, 1, 1, FlowChat, "lost on the way")
	a.Receive(lost)
	ctx := context.Background()
	c, _ := nb.Attach(ctx, "s_1", "m_c", "Cy") // after it was stored: in Cy's history
	defer c.Close()
	if h := hello(t, c); len(h.History) != 1 {
		t.Fatalf("Cy's hello has %d messages, want the one stored", len(h.History))
	}
	if f, bin := next(t, b); bin || !strings.Contains(string(f), `"Cy"`) {
		t.Fatalf("Bob is not told of Cy: %q", f)
	}
	if f, bin := next(t, b); !bin || string(f) != string(lost) {
		t.Fatalf("Bob got %q, want the lost message from the catalog", f)
	}
	mu.Lock()
	lose = false
	mu.Unlock()
	later := msg(conv, 1, 2, FlowChat, "relayed")
	a.Receive(later)
	for _, s := range []*Conn{b, c} {
		if f, bin := next(t, s); !bin || string(f) != string(later) {
			t.Fatalf("got %q, want the relayed message", f)
		}
	}
	time.Sleep(800 * time.Millisecond) // the catching up is over
	for name, s := range map[string]*Conn{"Bob": b, "Cy": c} {
		select {
		case f := <-s.out:
			t.Errorf("%s got one more frame %q: a message twice", name, f.bin)
		default:
		}
	}
	_ = na
}

// TestPointerAndNotes: the pointer (3) and notes (4) flows are accepted
// and forwarded without the data floor, which still gates the board; a
// flow 5 is refused; the pointer stays off the recordings' time line.
func TestPointerAndNotes(t *testing.T) {
	nt := &notes{}
	s, _ := setup(t, floors{holder: "m_a"}, nt)
	a, ha := attach(t, s, "m_a", "Ada")
	b, _ := attach(t, s, "m_b", "Bob")
	next(t, a) // Bob's member frame
	names := map[uint32]string{}
	for _, f := range ha.Flows {
		names[f.ID] = f.Name
	}
	if names[FlowPointer] != "pointer" || names[FlowNotes] != "notes" || len(names) != 4 {
		t.Fatalf("hello flows %+v", ha.Flows)
	}
	conv := ID("s_1")
	for i, m := range [][]byte{msg(conv, 2, 1, FlowPointer, "0.5,0.5"), msg(conv, 2, 2, FlowNotes, `{"t":1,"text":"agenda"}`)} {
		b.Receive(m)
		if f, bin := next(t, a); !bin || string(f) != string(m) {
			t.Fatalf("message %d: Ada got %q", i, f)
		}
	}
	b.Receive(msg(conv, 2, 3, FlowBoard, "stroke"))
	if code := errorCode(t, b); code != "floor" {
		t.Errorf("Bob draws without the floor: %s", code)
	}
	b.Receive(msg(conv, 2, 3, 5, "x"))
	if code := errorCode(t, b); code != "refused" {
		t.Errorf("flow 5: %s", code)
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if len(nt.got) != 1 || nt.got[0] != 2 {
		t.Errorf("time line got seqs %v, want only the notes' (2)", nt.got)
	}
}

// TestHistoryWithoutPointers: a hello's history leaves the pointer's
// positions out, so they push neither the chat nor the notes out of it,
// and carries each sender's newest notes however old; each sender's last
// still counts the pointer's, so a reloaded page goes on after them.
func TestHistoryWithoutPointers(t *testing.T) {
	_, cat := setup(t, nil, nil)
	// A clock a millisecond further at every reading: the catalog orders
	// messages by the time they were received, and a real clock gives
	// many the same millisecond.
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	s := New(Options{Catalog: cat, Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Millisecond)
		return clock
	}}, nil)
	conv := ID("s_1")
	a, _ := attach(t, s, "m_a", "Ada")
	b, _ := attach(t, s, "m_b", "Bob")
	b.Receive(msg(conv, 2, 1, FlowNotes, "v1"))
	b.Receive(msg(conv, 2, 2, FlowNotes, "v2"))
	for seq := uint64(1); seq <= MaxHistory; seq++ {
		a.Receive(msg(conv, 1, seq, FlowChat, "line"))
	}
	a.Close()
	a, ha := attach(t, s, "m_a", "Ada") // a fresh rate bucket
	if ha.Last[1] != MaxHistory {
		t.Fatalf("Ada's last %d", ha.Last[1])
	}
	for seq := uint64(MaxHistory + 1); seq <= MaxHistory+150; seq++ {
		a.Receive(msg(conv, 1, seq, FlowPointer, "0.1,0.2"))
	}
	for seq := uint64(3); seq <= 102; seq++ {
		b.Receive(msg(conv, 2, seq, FlowPointer, "0.3,0.4"))
	}
	_, hc := attach(t, s, "m_c", "Cy")
	if hc.Last[1] != MaxHistory+150 || hc.Last[2] != 102 {
		t.Errorf("Cy's last %v", hc.Last)
	}
	if len(hc.History) != MaxHistory+1 {
		t.Fatalf("Cy's history has %d messages, want %d", len(hc.History), MaxHistory+1)
	}
	var flows [5]int
	for i, h := range hc.History {
		raw, _ := base64.StdEncoding.DecodeString(h)
		var m conversation.Message
		if err := conversation.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		flows[m.Flow]++
		if i == 0 && (m.Flow != FlowNotes || string(m.Payload) != "v2") {
			t.Errorf("history starts with flow %d %q, want Bob's newest notes", m.Flow, m.Payload)
		}
	}
	if flows[FlowChat] != MaxHistory || flows[FlowNotes] != 1 || flows[FlowPointer] != 0 {
		t.Errorf("history by flow %v", flows)
	}
}

// TestAgentSaysNotes: an agent (a playback replaying a recording's notes)
// stamps its notes after every notes update it has seen, in its hello's
// history or live, so they win as an edit made then would; notes over
// MaxNotes are refused before they take a sequence number.
func TestAgentSaysNotes(t *testing.T) {
	s, _ := setup(t, nil, nil)
	ctx := context.Background()
	a, _ := attach(t, s, "m_a", "Ada")
	conv := ID("s_1")
	future := time.Now().Add(time.Hour).UnixMilli() // a clock ahead
	a.Receive(msg(conv, 1, 1, FlowNotes, fmt.Sprintf(`{"t":%d,"text":"Ada's"}`, future)))
	ag, err := s.AttachAgent(ctx, "s_1", "m_p", "Playback", func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	next(t, a) // Ada is told of the agent's member
	if err := ag.SayNotes(strings.Repeat("x", MaxNotes)); !errors.Is(err, ErrNotesTooBig) {
		t.Errorf("notes over the cap: %v", err)
	}
	if err := ag.SayNotes("<replayed> & kept"); err != nil {
		t.Fatal(err)
	}
	b, bin := next(t, a)
	var m conversation.Message
	var u NotesUpdate
	if !bin || conversation.Unmarshal(b, &m) != nil || json.Unmarshal(m.Payload, &u) != nil {
		t.Fatalf("Ada got %q", b)
	}
	if m.Flow != FlowNotes || m.Seq != 1 || u.T != future+1 || u.Text != "<replayed> & kept" {
		t.Errorf("the agent's notes: flow %d seq %d, %+v (want t %d)", m.Flow, m.Seq, u, future+1)
	}
}
