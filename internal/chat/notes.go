package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// NotesUpdate is the payload of a message of the notes flow: the whole of
// the session's shared notes, stamped T (Unix ms). Receivers keep the
// update with the greatest (T, sender, seq); an editor stamps
// max(now, the T it had + 1), so an update causally after another always
// wins (web/src/notes.ts has the rule and its tests; the node only
// stores and forwards, and an Agent replays a recording's notes).
type NotesUpdate struct {
	T    int64  `json:"t"`
	Text string `json:"text"`
}

// MaxNotes is the most bytes a notes payload takes (the rest of
// MaxMessage is the header's); web/src/notes.ts NOTES_MAX.
const MaxNotes = 15 << 10

// ErrNotesTooBig refuses notes over MaxNotes.
var ErrNotesTooBig = fmt.Errorf("notes over %d bytes", MaxNotes)

// notesT is the stamp of a notes message; ok is false for another flow's
// or a malformed one.
func notesT(flow uint32, payload []byte) (int64, bool) {
	var u NotesUpdate
	if flow != FlowNotes || json.Unmarshal(payload, &u) != nil {
		return 0, false
	}
	return u.T, true
}

// SayNotes sets the session's notes in the member's name (a playback
// replaying a recording's notes), stamped after every notes update the
// agent has seen.
func (a *Agent) SayNotes(text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	u := NotesUpdate{T: max(now.UnixMilli(), a.notesT+1), Text: text}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the page's JSON.stringify: no larger than it
	if err := enc.Encode(u); err != nil {
		return err
	}
	payload := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(payload) > MaxNotes { // before Send takes a sequence number
		return ErrNotesTooBig
	}
	m, err := a.p.Send(FlowNotes, payload, now)
	if err != nil {
		return err
	}
	a.notesT = u.T
	return a.c.take(m.Marshal())
}
