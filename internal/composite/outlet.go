package composite

import "github.com/convene/convene/internal/broker"

// Outlet is where a composite's picture goes: a track of the session's
// room, which its subscribers (browsers, RTP and SIP links, recordings)
// receive like any camera. The node makes it (Options.Publish).
type Outlet struct {
	Track *broker.Track
	// Member is the session member that publishes the track; its tracks
	// are never a composite's inputs.
	Member string
	// Gone is closed when the session took the track away (its member
	// was removed, the session stopped): the composite stops.
	Gone <-chan struct{}
	// Close takes the track and its member away.
	Close func()
}
