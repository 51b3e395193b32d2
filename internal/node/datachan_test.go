package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/rtctest"
	"github.com/convene/convene/internal/sfu"
)

// dialDataChat opens a member's "conversation" data channel on its
// publisher connection, as the web app does in a meeting, and returns the
// conversation over it and the member's WebRTC client.
func dialDataChat(t *testing.T, n *Node, sid, tok string) (*chatter, *rtctest.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, n.URL(), sid, tok, rtctest.Options{Conversation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	ch := &chatter{t: t,
		recv: func(ctx context.Context) ([]byte, bool, error) {
			select {
			case f := <-c.ChannelFrames():
				return f.Data, !f.IsString, nil
			case <-ctx.Done():
				return nil, false, fmt.Errorf("nothing on the conversation channel: %w", ctx.Err())
			}
		},
		send: func(_ context.Context, b []byte) error { return c.Channel.Send(b) }}
	ch.start()
	return ch, c
}

// closed waits until the node closes a data channel.
func closed(t *testing.T, dc *webrtc.DataChannel, what string) {
	t.Helper()
	done := make(chan struct{})
	dc.OnClose(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still %v after 10 s", what, dc.ReadyState())
	}
}

// TestChatOverDataChannels: two members' pion clients carry their
// conversation over "conversation" data channels on their publisher
// connections: hellos, numbering and messages as on the WebSocket, in
// the order sent (reordered by the participant if the unordered channel
// reorders), a reply carrying its context; a channel of another label and
// a second conversation channel are closed and counted while the first
// goes on; a message over chat's size cap gets the error frame; a member
// on the WebSocket sees what was said over the channels.
func TestChatOverDataChannels(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "dc chat")
	_, atok := joinMember(t, n, s.ID, "Ada")
	_, btok := joinMember(t, n, s.ID, "Bob")
	_, ctok := joinMember(t, n, s.ID, "Cy")
	a, ac := dialDataChat(t, n, s.ID, atok)
	b, bc := dialDataChat(t, n, s.ID, btok)
	if a.hello.Self != 1 || b.hello.Self != 2 || b.hello.Members[1].Name != "Ada" {
		t.Fatalf("hellos %+v / %+v", a.hello, b.hello)
	}
	if _, f := a.read(); f["type"] != "member" || f["name"] != "Bob" {
		t.Fatalf("Ada is told of Bob: %v", f)
	}
	a.p.Grow(3)
	if got := metricValue(t, n, "convene_webrtc_data_channels"); got != 2 {
		t.Errorf("convene_webrtc_data_channels %v, want 2", got)
	}

	for _, text := range []string{"one", "two", "three"} {
		a.say(text)
	}
	if got := strings.Join(b.hear(3), " "); got != "one two three" {
		t.Fatalf("Bob heard %q", got)
	}
	reply := b.say("got them")
	if len(reply.Context) != 1 || reply.Context[0].Member != 1 || reply.Context[0].Seq != 3 {
		t.Errorf("the reply's context %+v, want Ada's 3", reply.Context)
	}
	if got := a.hear(1); got[0] != "got them" {
		t.Fatalf("Ada heard %q", got)
	}

	// Another label, and a second conversation channel: closed at once.
	other, err := ac.Pub.CreateDataChannel("files", nil)
	if err != nil {
		t.Fatal(err)
	}
	closed(t, other, `a channel labelled "files"`)
	unordered := false
	second, err := ac.Pub.CreateDataChannel(sfu.ConversationLabel, &webrtc.DataChannelInit{Ordered: &unordered})
	if err != nil {
		t.Fatal(err)
	}
	closed(t, second, "a second conversation channel")
	for reason, want := range map[string]float64{"label": 1, "second": 1} {
		if got := metricValue(t, n, `convene_webrtc_data_channels_refused_total{reason="`+reason+`"}`); got != want {
			t.Errorf("refused %s: %v, want %v", reason, got, want)
		}
	}
	a.say("still here")
	if got := b.hear(1); got[0] != "still here" {
		t.Fatalf("Bob heard %q", got)
	}

	// Over chat's cap (but under the channel's): the error frame, and the
	// channel stays open.
	big := make([]byte, chat.MaxMessage+1)
	if err := ac.Channel.Send(big); err != nil {
		t.Fatal(err)
	}
	if _, f := a.read(); f["type"] != "error" || !strings.Contains(f["message"].(string), "too big") {
		t.Fatalf("an over-size message: %v", f)
	}
	if ac.Channel.ReadyState() != webrtc.DataChannelStateOpen {
		t.Errorf("the channel is %v after an over-size message", ac.Channel.ReadyState())
	}

	// Cy on the WebSocket: the same conversation, all five messages.
	cy := dialChat(t, n, s.ID, ctok)
	if len(cy.hello.History) != 5 || cy.hello.Last[1] != 4 || cy.hello.Last[2] != 1 {
		t.Errorf("Cy's hello: %d in history, last %v", len(cy.hello.History), cy.hello.Last)
	}

	// Hanging up closes the channel's place in the conversation.
	bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rtctest.WaitFor(ctx, func() bool { return metricValue(t, n, "convene_webrtc_data_channels") == 1 }); err != nil {
		t.Errorf("Bob hung up: %v conversation channels open, want 1", metricValue(t, n, "convene_webrtc_data_channels"))
	}
}

// TestWHIPGetsNoDataChannel: a WHIP publisher's offer may carry a data
// channel; the node answers it (the media flows) but closes the channel
// at once: only a browser member's signalling-backed peer has one.
func TestWHIPGetsNoDataChannel(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "whip dc")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, _, err := rtctest.WHIP(ctx, n.URL(), s.ID, joinToken(t, n, s.ID, "participant"), rtctest.Options{Audio: true, Conversation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	closed(t, pub.Channel, "a WHIP publisher's conversation channel")
	if got := metricValue(t, n, `convene_webrtc_data_channels_refused_total{reason="not_browser"}`); got != 1 {
		t.Errorf("refused not_browser: %v, want 1", got)
	}
	if got := metricValue(t, n, "convene_webrtc_data_channels_opened_total"); got != 0 {
		t.Errorf("channels opened: %v, want 0", got)
	}
}
