package playback

import (
	"encoding/base64"
	"sort"
	"strings"
	"time"

	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/recorder"
)

// Text is a chat line on a recording's time line (a "message" event of
// the chat flow), played at its place among the media.
type Text struct {
	At   time.Duration // on the recording's time line
	From string        // the sender's name, as the time line knew it
	Text string
}

// chatFlow is the conversation flow of chat lines (package chat's
// FlowChat; the whiteboard's strokes are not replayed).
const chatFlow = 1

// textsOf reads the chat lines of a recording's time line, in time order;
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
		if conversation.Unmarshal(b, &msg) != nil || msg.Flow != chatFlow {
			continue
		}
		from := names[e.Member]
		if from == "" {
			from = e.Member
		}
		out = append(out, Text{At: time.Duration(e.OffsetMS) * time.Millisecond, From: from, Text: string(msg.Payload)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
