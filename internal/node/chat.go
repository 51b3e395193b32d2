package node

import (
	"context"
	"encoding/base64"
	"strconv"
	"time"

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
