package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/bus"

	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/session"
)

// chatFloors lets a member draw on the board while it holds the session's
// "data" floor (always, in the style none).
type chatFloors struct{ sessions *session.Service }

func (f chatFloors) MayDraw(sessionID, memberID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := f.sessions.Floors(ctx, sessionID)
	if err != nil {
		return false
	}
	return c.Holds(memberID, "data")
}

// chatNotes puts a session's messages on its recordings' time lines: the
// wire message base64 in Detail, "flow/seq" in Stream.
type chatNotes struct{ n *Node }

func (c chatNotes) NoteMessage(sessionID, memberID string, flow uint32, seq uint64, wire []byte) {
	if c.n.recordings == nil {
		return
	}
	c.n.recordings.Note(sessionID, recorder.Event{Kind: recorder.Message, Member: memberID,
		Stream: strconv.FormatUint(uint64(flow), 10) + "/" + strconv.FormatUint(seq, 10),
		Detail: base64.StdEncoding.EncodeToString(wire)})
}

// chatRelay carries the sessions' conversations between nodes on NATS:
// subject convene.chat.<session>, the origin node in a header so a node
// skips its own.
type chatRelay struct{ b *bus.Bus }

const chatOrigin = "Convene-Node"

func chatSubject(sessionID string) (string, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, ".*> \t\r\n") {
		return "", fmt.Errorf("chat relay: bad session ID %q", sessionID)
	}
	return "convene.chat." + sessionID, nil
}

func (r chatRelay) Publish(sessionID string, b []byte) error {
	subj, err := chatSubject(sessionID)
	if err != nil {
		return err
	}
	m := nats.NewMsg(subj)
	m.Header.Set(chatOrigin, r.b.NodeID())
	m.Data = b
	return r.b.Conn().PublishMsg(m)
}

func (r chatRelay) Subscribe(sessionID string, f func(b []byte)) (func(), error) {
	subj, err := chatSubject(sessionID)
	if err != nil {
		return nil, err
	}
	self := r.b.NodeID()
	sub, err := r.b.Conn().Subscribe(subj, func(m *nats.Msg) {
		if m.Header.Get(chatOrigin) != self {
			f(m.Data)
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
