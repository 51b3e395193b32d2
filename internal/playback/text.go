package playback

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/recorder"
)

// Text is a chat line on a recording's time line (a "message" event of
// the chat flow), or an update of the shared notes, played at its place
// among the media.
type Text struct {
	At    time.Duration // on the recording's time line
	From  string        // the sender's name, as the time line knew it
	Text  string
	Notes bool // Text is the whole of the session's notes (the notes flow)
}

// The conversation flows replayed: chat lines and the shared notes
// (package chat's FlowChat and FlowNotes; the whiteboard's strokes are
// not replayed, and the pointer is not on the time line).
const (
	chatFlow  = 1
	notesFlow = 4
)

// notesText is the document of a notes update (web/src/notes.ts: JSON
// {"t": ms, "text": "…"}); ok is false for anything malformed.
func notesText(payload []byte) (string, bool) {
	var u struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(payload, &u) != nil || u.Text == nil {
		return "", false
	}
	return *u.Text, true
}

// textsOf reads the chat lines and notes of a recording's time line, in time order;
// the senders are named by their member_joined events.
func textsOf(m *recorder.Manifest) []Text {
	names := map[string]string{}
	for _, e := range m.Events {
		if e.Kind == recorder.MemberJoined && e.Detail != "" {
			names[e.Member] = strings.TrimSuffix(e.Detail, " (present)")
		}
	}
	var out []Text
	for _, e := range m.Events {
		if e.Kind != recorder.Message {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(e.Detail)
		if err != nil {
			continue
		}
		var msg conversation.Message
		if conversation.Unmarshal(b, &msg) != nil || (msg.Flow != chatFlow && msg.Flow != notesFlow) {
			continue
		}
		from := names[e.Member]
		if from == "" {
			from = e.Member
		}
		t := Text{At: time.Duration(e.OffsetMS) * time.Millisecond, From: from, Text: string(msg.Payload)}
		if msg.Flow == notesFlow {
			var ok bool
			if t.Text, ok = notesText(msg.Payload); !ok {
				continue
			}
			t.Notes = true
		}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
