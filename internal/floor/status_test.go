package floor

import "testing"

// Every pair of statuses: the legal moves are exactly these.
func TestStatusTransitions(t *testing.T) {
	want := map[[2]Status]bool{
		{Pending, Accepted}: true, {Pending, Granted}: true, {Pending, Denied}: true, {Pending, Cancelled}: true,
		{Accepted, Granted}: true, {Accepted, Denied}: true, {Accepted, Cancelled}: true,
		{Granted, Released}: true, {Granted, Revoked}: true,
	}
	for _, from := range Statuses {
		for _, to := range Statuses {
			if got := CanMove(from, to); got != want[[2]Status{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
	}
	for _, s := range Statuses {
		final := s == Denied || s == Cancelled || s == Released || s == Revoked
		if s.Final() != final {
			t.Errorf("%s.Final() = %v", s, s.Final())
		}
		if s.Waiting() != (s == Pending || s == Accepted) {
			t.Errorf("%s.Waiting() = %v", s, s.Waiting())
		}
	}
}
