package session

import "github.com/convene/convene/internal/event"

// Actions move a session between states.
const (
	ActionActivate   = "activate"
	ActionDeactivate = "deactivate"
	ActionCancel     = "cancel"
	ActionFinish     = "finish"
)

// Actions lists every action.
var Actions = []string{ActionActivate, ActionDeactivate, ActionCancel, ActionFinish}

// States lists every session state.
var States = []string{StateCreated, StateCanceled, StateActivated, StateDeactivated, StateFinished}

// transitions is the XGSP session lifecycle as a table, state → action →
// next state:
//
//	created ──activate──▶ activated ──deactivate──▶ deactivated
//	   │                   │    ▲                       │
//	 cancel              finish └──────activate─────────┤
//	   ▼                   ▼                          finish
//	canceled            finished ◀──────────────────────┘
//
// canceled and finished are final.
var transitions = map[string]map[string]string{
	StateCreated:     {ActionActivate: StateActivated, ActionCancel: StateCanceled},
	StateActivated:   {ActionDeactivate: StateDeactivated, ActionFinish: StateFinished},
	StateDeactivated: {ActionActivate: StateActivated, ActionFinish: StateFinished},
}

// Next returns the state that action leads to from state, and false when
// the action is not allowed there.
func Next(state, action string) (string, bool) {
	to, ok := transitions[state][action]
	return to, ok
}

// Final reports whether no action leaves state.
func Final(state string) bool { return len(transitions[state]) == 0 }

// StateError is a refused transition; it wraps ErrConflict and the API
// shows the session's current state with it.
type StateError struct {
	State, Action string
}

func (e *StateError) Error() string {
	return "session is " + e.State + "; cannot " + e.Action + " it"
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *StateError) Unwrap() error { return ErrConflict }

// stateEvent is the event announcing that a session entered a state.
var stateEvent = map[string]event.Type{
	StateCreated:     event.Created,
	StateActivated:   event.Activated,
	StateDeactivated: event.Deactivated,
	StateFinished:    event.Finished,
	StateCanceled:    event.Canceled,
}
