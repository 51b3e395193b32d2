package bus

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/convene/convene/internal/event"
)

// Subject roots and wildcards.
const (
	// SessionPrefix is the subject prefix of all session events.
	SessionPrefix = "convene.session"
	// NodePrefix is the subject prefix of all node events.
	NodePrefix = "convene.node"

	// AllSessionEvents matches every session event of every session.
	AllSessionEvents = SessionPrefix + ".>"
	// AllNodeEvents matches every node event of every node.
	AllNodeEvents = NodePrefix + ".>"
	// AllHeartbeats matches the heartbeats of every node.
	AllHeartbeats = NodePrefix + ".*." + EventHeartbeat

	// PingPrefix is the subject prefix of the nodes' delay probes
	// (PingSubject); outside convene.node so that watchers of node events
	// do not get a probe from every node every 2 s.
	PingPrefix = "convene.ping"
)

// PingSubject returns convene.ping.<nodeID>: a request there is answered
// at once with an empty reply by that node (package peerdelay).
func PingSubject(nodeID string) (string, error) {
	if err := ValidateToken(nodeID); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return PingPrefix + "." + nodeID, nil
}

// Session event types are event.Type values (package event); their names
// are the subject suffix after convene.session.<sessionID>.

// Node event types (the subject suffix after convene.node.<nodeID>.).
const (
	EventHeartbeat = "heartbeat"
	EventDraining  = "draining"
	EventStopped   = "stopped"
	// EventServices reports the node's media services (mixers,
	// transcoders): their liveness and load (package supervise).
	EventServices = "services"
)

// ErrInvalidToken is returned for IDs that cannot be used as a subject token.
var ErrInvalidToken = errors.New("bus: invalid subject token")

// ErrUnknownEvent is returned for event types that have no subject.
var ErrUnknownEvent = errors.New("bus: unknown event type")

// ValidateToken reports whether id can be used as a single subject token:
// it must be non-empty valid UTF-8 without '.', '*', '>', whitespace or
// control characters.
func ValidateToken(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidToken, id)
	}
	if i := strings.IndexFunc(id, func(r rune) bool {
		return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r)
	}); i >= 0 {
		return fmt.Errorf("%w: %q contains forbidden character at byte %d", ErrInvalidToken, id, i)
	}
	return nil
}

// IsNodeEvent reports whether typ is a known node event type.
func IsNodeEvent(typ string) bool {
	switch typ {
	case EventHeartbeat, EventDraining, EventStopped, EventServices:
		return true
	}
	return false
}

// SessionSubject returns convene.session.<sessionID>.<typ> for a session
// event type.
func SessionSubject(sessionID string, typ event.Type) (string, error) {
	if err := ValidateToken(sessionID); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	if !typ.Valid() {
		return "", fmt.Errorf("%w: session event %v", ErrUnknownEvent, typ)
	}
	return SessionPrefix + "." + sessionID + "." + typ.String(), nil
}

// SessionWildcard returns convene.session.<sessionID>.> which matches every
// event of one session.
func SessionWildcard(sessionID string) (string, error) {
	if err := ValidateToken(sessionID); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return SessionPrefix + "." + sessionID + ".>", nil
}

// NodeSubject returns convene.node.<nodeID>.<typ> for a known node event
// type (EventHeartbeat, EventDraining, EventStopped).
func NodeSubject(nodeID, typ string) (string, error) {
	if err := ValidateToken(nodeID); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	if !IsNodeEvent(typ) {
		return "", fmt.Errorf("%w: node event %q", ErrUnknownEvent, typ)
	}
	return NodePrefix + "." + nodeID + "." + typ, nil
}

// HeartbeatSubject returns convene.node.<nodeID>.heartbeat.
func HeartbeatSubject(nodeID string) (string, error) {
	return NodeSubject(nodeID, EventHeartbeat)
}
