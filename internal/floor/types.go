package floor

import (
	"errors"
	"time"
)

// Styles of a floor.
const (
	StyleNone          = "none"
	StyleFloorControl  = "floor_control"
	StyleBrainstorming = "brainstorming"
	StyleChalkboard    = "chalkboard"
	StyleDiscussion    = "discussion_groups"
	StyleActivity      = "activity_sensing"
)

// ValidStyle reports whether s is a style.
func ValidStyle(s string) bool {
	switch s {
	case StyleNone, StyleFloorControl, StyleBrainstorming, StyleChalkboard, StyleDiscussion, StyleActivity:
		return true
	}
	return false
}

// Member roles.
const (
	RoleChair       = "chair"
	RoleParticipant = "participant"
	RoleListener    = "listener"
)

// ValidRole reports whether r is a role.
func ValidRole(r string) bool { return r == RoleChair || r == RoleParticipant || r == RoleListener }

// Floors of every session: one per media kind, and "data" for the
// shared whiteboard (package chat).
var Floors = []string{"audio", "video", "data"}

// Silence bounds of activity sensing.
const (
	MinSilence     = 200 * time.Millisecond
	MaxSilence     = 400 * time.Millisecond
	DefaultSilence = 300 * time.Millisecond
)

// Errors of the controller.
var (
	ErrNotFound  = errors.New("not found")
	ErrForbidden = errors.New("forbidden")
	ErrConflict  = errors.New("conflict")
	ErrInvalid   = errors.New("invalid")
)

// Request is a member's request for a floor.
type Request struct {
	ID     string `json:"id"`
	Floor  string `json:"floor"`
	Member string `json:"member"`
	Status Status `json:"status"`
	// Position in the floor's queue (1 is next), while Accepted.
	Position int `json:"position,omitempty"`
	// Group is the subgroup the request is arbitrated in (discussion groups).
	Group string `json:"group,omitempty"`
	// Replica is set when the request holds (or held) a replica token.
	Replica bool `json:"replica,omitempty"`
	// Holders, in a notification of a new request, are the members then
	// holding the floor: the seed's asynchronous notice to token holders.
	Holders []string `json:"holders,omitempty"`
}

// Token is one token of a floor.
type Token struct {
	ID      string `json:"id"`
	Holder  string `json:"holder,omitempty"` // "" while the token is free
	Replica bool   `json:"replica"`
	Group   string `json:"group,omitempty"`
}

// State is a floor as the API shows it.
type State struct {
	Name      string    `json:"name"`
	Style     string    `json:"style"`
	Auto      bool      `json:"auto"`
	Phase     int       `json:"phase,omitempty"`
	SilenceMS int       `json:"silence_ms,omitempty"`
	Tokens    []Token   `json:"tokens"`
	Queue     []Request `json:"queue"`
}

// Settings change a floor's style.
type Settings struct {
	Style string `json:"style"`
	// Auto grants a free token to the first requester without a chair.
	Auto bool `json:"auto"`
	// SilenceMS is activity sensing's silence, 200..400 (0: 300).
	SilenceMS int `json:"silence_ms,omitempty"`
}
