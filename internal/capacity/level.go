package capacity

// Level is how much the node sheds. Each level keeps what the one below
// it sheds shed.
type Level int32

// Shed levels, in the order they are taken.
const (
	Normal        Level = iota // nothing shed
	LowestLayer                // simulcast layers above the lowest not forwarded
	SpeakersVideo              // video only of the active speakers
	NoVideo                    // no video forwarded at all; audio still is
)

var levelNames = [...]string{"normal", "lowest_layer", "speakers_video", "no_video"}

// String is the level's name in events, metrics and the API.
func (l Level) String() string {
	if l >= Normal && l <= NoVideo {
		return levelNames[l]
	}
	return "unknown"
}

// Describe says what the level means to a member ("video paused: server
// busy").
func (l Level) Describe() string {
	switch l {
	case LowestLayer:
		return "video at its lowest quality: server busy"
	case SpeakersVideo:
		return "video of members not speaking paused: server busy"
	case NoVideo:
		return "video paused: server busy"
	}
	return "video restored"
}

// Change is a step of the shed level, with the load that caused it.
type Change struct {
	From, To Level
	// LoadPPS and CapacityPPS are the figures at the step.
	LoadPPS, CapacityPPS float64
}
