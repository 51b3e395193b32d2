package session

import (
	"errors"
	"testing"
)

// Every (state, action) pair: exactly the XGSP lifecycle is allowed.
func TestStateTable(t *testing.T) {
	legal := map[[2]string]string{
		{StateCreated, ActionActivate}:     StateActivated,
		{StateCreated, ActionCancel}:       StateCanceled,
		{StateActivated, ActionDeactivate}: StateDeactivated,
		{StateActivated, ActionFinish}:     StateFinished,
		{StateDeactivated, ActionActivate}: StateActivated,
		{StateDeactivated, ActionFinish}:   StateFinished,
	}
	for _, st := range States {
		for _, a := range Actions {
			to, ok := Next(st, a)
			want, wantOK := legal[[2]string{st, a}]
			if ok != wantOK || to != want {
				t.Errorf("Next(%s, %s) = %q %v, want %q %v", st, a, to, ok, want, wantOK)
			}
		}
	}
	for _, st := range States {
		if Final(st) != (st == StateCanceled || st == StateFinished) {
			t.Errorf("Final(%s) = %v", st, Final(st))
		}
	}
	if _, ok := Next(StateActivated, "explode"); ok {
		t.Error("unknown action allowed")
	}
	err := error(&StateError{State: StateFinished, Action: ActionActivate})
	if !errors.Is(err, ErrConflict) {
		t.Error("StateError is not a conflict")
	}
}
