// Package event names the events of a session: a small enum the compiler
// checks, shared by the packages that emit them (session, floor), the event
// log that numbers them (events) and the NATS subjects they go out on
// (bus). A misspelt event is a build error, not a message dropped at run
// time. It imports nothing of ours.
package event

import "fmt"

// Type is a session event type. Its String is the name clients see (the
// "type" of a WebSocket frame) and the NATS subject's suffix
// (convene.session.<id>.<name>).
type Type uint8

// Session events. The zero Type is no event.
const (
	_ Type = iota
	Created
	Activated
	Deactivated
	Finished
	Canceled
	LinkAdded
	LinkRemoved
	MemberJoined
	MemberLeft
	MemberUpdated
	SubgroupCreated
	SubgroupDeleted
	FloorRequest // a floor request changed status (BFCP names)
	FloorStyle   // a floor's style or chalkboard phase changed
	MediaMuted   // a member muted or unmuted its microphone or camera
	SpeakerActive
	MixerSpeakers    // a mixer's active speakers (the loudest K it mixes) changed
	RecordingStarted // a recording of the session started
	RecordingStopped // a recording of the session ended (finished or failed)
	LoadShed         // the node sheds (or restores) video because it is over capacity
	HLSStarted       // a chair or the operator started the session's HLS broadcast
	HLSStopped       // the session's HLS broadcast stopped (asked to, or its session ended)
	RecordingMoved   // a recording of the session continues on another node (its node died)
	HLSMoved         // the session's HLS broadcast runs on another node now (its node died)
	CompositeMoved   // a composite of the session runs on another node now (its node died)
	numTypes
)

var names = [numTypes]string{
	Created:          "created",
	Activated:        "activated",
	Deactivated:      "deactivated",
	Finished:         "finished",
	Canceled:         "canceled",
	LinkAdded:        "link.added",
	LinkRemoved:      "link.removed",
	MemberJoined:     "member.joined",
	MemberLeft:       "member.left",
	MemberUpdated:    "member.updated",
	SubgroupCreated:  "subgroup.created",
	SubgroupDeleted:  "subgroup.deleted",
	FloorRequest:     "floor.request",
	FloorStyle:       "floor.style",
	MediaMuted:       "media.muted",
	SpeakerActive:    "speaker.active",
	MixerSpeakers:    "mixer.speakers",
	RecordingStarted: "recording.started",
	RecordingStopped: "recording.stopped",
	LoadShed:         "load.shed",
	HLSStarted:       "hls.started",
	HLSStopped:       "hls.stopped",
	RecordingMoved:   "recording.moved",
	HLSMoved:         "hls.moved",
	CompositeMoved:   "composite.moved",
}

// Valid reports whether t is one of the events above.
func (t Type) Valid() bool { return t > 0 && t < numTypes }

// String returns the event's name ("link.added").
func (t Type) String() string {
	if t.Valid() {
		return names[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// MarshalText writes the name, so JSON shows "link.added".
func (t Type) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("event: unknown type %d", uint8(t))
	}
	return []byte(names[t]), nil
}

// Parse returns the event named s.
func Parse(s string) (Type, bool) {
	for t := Created; t < numTypes; t++ {
		if names[t] == s {
			return t, true
		}
	}
	return 0, false
}

// All returns every event type, in order.
func All() []Type {
	out := make([]Type, 0, numTypes-1)
	for t := Created; t < numTypes; t++ {
		out = append(out, t)
	}
	return out
}
