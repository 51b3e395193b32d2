package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/testutil"
)

// chatter is a member's conversation with package conversation's
// participant, over its conversation WebSocket (c) or its data channel
// (datachan_test.go): what a Go client of the node does.
type chatter struct {
	t     *testing.T
	c     *websocket.Conn // nil over a data channel
	hello chat.Hello
	p     *conversation.Participant
	// recv reads the next frame, send writes a binary one.
	recv func(ctx context.Context) (b []byte, binary bool, err error)
	send func(ctx context.Context, b []byte) error
}

func dialChat(t *testing.T, n *Node, sid, tok string) *chatter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := strings.Replace(n.URL(), "http", "ws", 1) + "/api/v1/sessions/" + sid + "/conversation"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	ch := &chatter{t: t, c: c,
		recv: func(ctx context.Context) ([]byte, bool, error) {
			typ, b, err := c.Read(ctx)
			return b, typ == websocket.MessageBinary, err
		},
		send: func(ctx context.Context, b []byte) error { return c.Write(ctx, websocket.MessageBinary, b) }}
	ch.start()
	return ch
}

// start reads the hello and makes the participant.
func (ch *chatter) start() {
	ch.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, bin, err := ch.recv(ctx)
	if err != nil || bin || json.Unmarshal(b, &ch.hello) != nil || ch.hello.Type != "hello" {
		ch.t.Fatalf("hello: %v %q", err, b)
	}
	if ch.p, err = chat.ParticipantFor(ch.hello); err != nil {
		ch.t.Fatal(err)
	}
}

// read returns the next frame: a message, or JSON text.
func (ch *chatter) read() (msg *conversation.Message, text map[string]any) {
	ch.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, bin, err := ch.recv(ctx)
	if err != nil {
		ch.t.Fatal(err)
	}
	if bin {
		var m conversation.Message
		if err := conversation.Unmarshal(b, &m); err != nil {
			ch.t.Fatal(err)
		}
		return &m, nil
	}
	json.Unmarshal(b, &text)
	return nil, text
}

// say sends a chat message.
func (ch *chatter) say(text string) conversation.Message {
	ch.t.Helper()
	m, err := ch.p.Send(chat.FlowChat, []byte(text), time.Now())
	if err != nil {
		ch.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ch.send(ctx, m.Marshal()); err != nil {
		ch.t.Fatal(err)
	}
	return m
}

// hear reads until want messages were delivered (in the participant's
// order, whatever order they came in) and returns their payloads.
func (ch *chatter) hear(want int) []string {
	ch.t.Helper()
	var got []string
	for len(got) < want {
		m, f := ch.read()
		if m == nil {
			if f["type"] == "error" {
				ch.t.Fatalf("error frame: %v", f)
			}
			continue
		}
		out, err := ch.p.Receive(*m, time.Now())
		if err != nil {
			ch.t.Fatal(err)
		}
		for _, d := range out {
			if d.Status != conversation.Delivered {
				ch.t.Errorf("%q delivered %v", d.Message.Payload, d.Status)
			}
			got = append(got, string(d.Message.Payload))
		}
	}
	return got
}

// TestChatBetweenMembers: two members chat through the node's
// conversation sockets: numbered 1 and 2, each message reaches the other
// as sent and in the order sent, a reply carries what it answers as its
// context, a message in the other's name is refused with a reason, a
// member who comes back gets the history, and the session's recording
// has the messages on its time line.
func TestChatBetweenMembers(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, testConfig(t, dataDir))
	s := createSession(t, n, "chat")
	ada, atok := joinMember(t, n, s.ID, "Ada")
	_, btok := joinMember(t, n, s.ID, "Bob")
	var rec recordingJSON
	if code := call(t, "POST", n.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "chat"}, &rec); code != 201 {
		t.Fatalf("record: %d", code)
	}
	a := dialChat(t, n, s.ID, atok)
	b := dialChat(t, n, s.ID, btok)
	if a.hello.Self != 1 || b.hello.Self != 2 || b.hello.Members[1].Name != "Ada" {
		t.Fatalf("hellos %+v / %+v", a.hello, b.hello)
	}
	if _, f := a.read(); f["type"] != "member" || f["name"] != "Bob" {
		t.Fatalf("Ada is told of Bob: %v", f)
	}
	a.p.Grow(3)
	b.p.Grow(3)
	for _, text := range []string{"one", "two", "three"} {
		a.say(text)
	}
	for _, want := range []string{"one", "two", "three"} {
		m, _ := b.read()
		if m == nil || string(m.Payload) != want || m.Sender != 1 {
			t.Fatalf("Bob got %+v, want %q from 1", m, want)
		}
		out, err := b.p.Receive(*m, time.Now())
		if err != nil || len(out) != 1 || out[0].Status != conversation.Delivered {
			t.Fatalf("Bob's delivery of %q: %+v %v", want, out, err)
		}
	}
	reply := b.say("got them")
	if len(reply.Context) != 1 || reply.Context[0].Member != 1 || reply.Context[0].Seq != 3 {
		t.Errorf("the reply's context %+v, want Ada's 3", reply.Context)
	}
	if m, _ := a.read(); m == nil || string(m.Payload) != "got them" {
		t.Fatalf("Ada got %+v", m)
	}
	forged := conversation.Message{Conversation: a.hello.Conversation, Flow: chat.FlowChat, Sender: 2, Seq: 9, Sent: time.Now(), Payload: []byte("x")}
	a.c.Write(context.Background(), websocket.MessageBinary, forged.Marshal())
	if _, f := a.read(); f["type"] != "error" || !strings.Contains(f["message"].(string), "sender 2") {
		t.Errorf("a message in Bob's name: %v", f)
	}
	a.c.Close(websocket.StatusNormalClosure, "")
	again := dialChat(t, n, s.ID, atok)
	if again.hello.Self != 1 || len(again.hello.History) != 4 || again.hello.Last[1] != 3 || again.hello.Last[2] != 1 {
		t.Errorf("Ada back: self %d, %d in history, last %v", again.hello.Self, len(again.hello.History), again.hello.Last)
	}
	if m := again.say("four"); m.Seq != 4 {
		t.Errorf("Ada's next message after coming back is seq %d, want 4", m.Seq)
	}
	if m, _ := b.read(); m == nil || m.Seq != 4 {
		t.Fatalf("Bob got %+v", m)
	}
	var got recordingJSON
	call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/stop", map[string]any{}, nil)
	call(t, "GET", n.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
	var said []string
	for _, e := range got.Timeline {
		if e.Kind == "message" {
			said = append(said, e.Member)
		}
	}
	if len(said) != 5 || said[0] != ada {
		t.Errorf("the recording's time line has %d messages (%v), want 5, Ada's first", len(said), said)
	}

	// Played back into the session, the recording says its chat again,
	// in order, as the playback's member.
	var pb struct{ ID, Member string }
	if code := call(t, "POST", n.URL()+"/api/v1/recordings/"+rec.ID+"/play", map[string]any{"session": s.ID}, &pb); code != 201 {
		t.Fatalf("play: %d", code)
	}
	var replayed []string
	for len(replayed) < 5 {
		m, f := b.read()
		if f != nil {
			continue // the playback's member being numbered
		}
		replayed = append(replayed, string(m.Payload))
	}
	want := []string{"[Ada] one", "[Ada] two", "[Ada] three", "[Bob] got them", "[Ada] four"}
	if strings.Join(replayed, "|") != strings.Join(want, "|") {
		t.Errorf("replayed %q, want %q", replayed, want)
	}
}

// TestPhoneChatsByMessage: a SIPp phone dialled into a session gets a
// member's chat line as a SIP MESSAGE inside its call ("Ada: hello
// phone"; the scenario fails on anything else), and its own MESSAGE
// reaches the member's conversation socket in the phone's name.
func TestPhoneChatsByMessage(t *testing.T) {
	n, ctx := newSIPpNode(t)
	s := createSession(t, n, "phone chat")
	_, atok := joinMember(t, n, s.ID, "Ada")
	ada := dialChat(t, n, s.ID, atok)
	phone := startSIPp(t, ctx, n, "dialin_chat.xml", s.ID)
	// The phone is numbered when it joins: Ada is told.
	var phoneN float64
	for phoneN == 0 {
		if _, f := ada.read(); f["type"] == "member" && strings.HasSuffix(f["name"].(string), "(phone)") {
			phoneN = f["n"].(float64)
		}
	}
	ada.p.Grow(int(phoneN) + 1)
	ada.say("hello phone")
	for {
		m, _ := ada.read()
		if m == nil {
			continue
		}
		if uint32(m.Sender) != uint32(phoneN) || string(m.Payload) != "hi from the phone" {
			t.Fatalf("Ada got %q from %d, want the phone's line from %v", m.Payload, m.Sender, phoneN)
		}
		if len(m.Context) != 1 || m.Context[0].Member != 1 {
			t.Errorf("the phone's line depends on %+v, want Ada's", m.Context)
		}
		break
	}
	phone.wait(t)
	if v := metricValue(t, n, `convene_sip_chat_messages_total{result="sent"}`); v != 1 {
		t.Errorf("MESSAGEs sent to phones: %v", v)
	}
}

// TestChatAcrossNodes: two members of one session on different nodes of
// a cluster (external NATS, PostgreSQL) chat: what node A accepts reaches
// the member on node B over the relay, and back; the numbers are the
// shared catalog's.
func TestChatAcrossNodes(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	s := createSession(t, a, "chat across nodes")
	_, atok := joinMember(t, a, s.ID, "Ada")
	_, btok := joinMember(t, b, s.ID, "Bob")
	ada := dialChat(t, a, s.ID, atok)
	bob := dialChat(t, b, s.ID, btok)
	if ada.hello.Self == bob.hello.Self {
		t.Fatalf("Ada and Bob have one number, %d", ada.hello.Self)
	}
	ada.p.Grow(3)
	bob.p.Grow(3)
	// Node B's subscription reaches A's server through the routes in a
	// moment: Ada says something until Bob hears it, never a timed wait.
	testutil.WaitUntil(t, 30*time.Second, func() string {
		ada.say("ping")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		for {
			typ, b, err := bob.c.Read(ctx)
			if err != nil {
				return "no line of Ada's reached Bob on node B"
			}
			if typ == websocket.MessageBinary && len(b) > 0 {
				return ""
			}
		}
	})
	ada.say("hello Bob")
	for {
		m, _ := bob.read()
		if m != nil && string(m.Payload) == "hello Bob" {
			if uint32(m.Sender) != ada.hello.Self {
				t.Errorf("from %d, Ada is %d", m.Sender, ada.hello.Self)
			}
			break
		}
	}
	bob.say("hi Ada, from node B")
	for {
		m, _ := ada.read()
		if m != nil && string(m.Payload) == "hi Ada, from node B" {
			break
		}
	}
	if v := metricValue(t, b, "convene_chat_relayed_total"); v < 2 {
		t.Errorf("node B relayed %v messages", v)
	}
}
