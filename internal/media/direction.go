package media

// Direction is the endpoint's media direction, as in SDP.
type Direction string

// Directions.
const (
	SendRecv Direction = "sendrecv"
	SendOnly Direction = "sendonly" // the endpoint only sends
	RecvOnly Direction = "recvonly" // the endpoint only receives
)

// Valid reports whether d is one of the directions.
func (d Direction) Valid() bool { return d == SendRecv || d == SendOnly || d == RecvOnly }

// Sends reports whether the endpoint sends media into the session.
func (d Direction) Sends() bool { return d == SendRecv || d == SendOnly }

// Receives reports whether the endpoint receives the session's media.
func (d Direction) Receives() bool { return d == SendRecv || d == RecvOnly }

// Drop reasons counted per link (rtplink, multicast) and per relay stream.
const (
	DropTruncated  = "truncated"
	DropBadVersion = "bad_version"
	DropDirection  = "direction" // media from an endpoint that may not send
	DropConsent    = "consent"   // media for an endpoint that has not sent first (Config.Consent)
)
