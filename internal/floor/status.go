package floor

// Status is the state of a floor request, named as BFCP's RequestStatus
// values (RFC 8855 §5.2.5). A request is created Pending (waiting for a
// chair), Accepted (queued, with a position), Granted (holding a token) or
// Denied (a listener's), and then moves only along this table:
//
//	Pending  → Accepted | Granted | Denied | Cancelled
//	Accepted → Granted | Denied | Cancelled
//	Granted  → Released | Revoked
//	Denied, Cancelled, Released, Revoked: final
type Status string

// Request statuses.
const (
	Pending   Status = "Pending"
	Accepted  Status = "Accepted"
	Granted   Status = "Granted"
	Denied    Status = "Denied"
	Cancelled Status = "Cancelled"
	Released  Status = "Released"
	Revoked   Status = "Revoked"
)

// Statuses lists every status.
var Statuses = []Status{Pending, Accepted, Granted, Denied, Cancelled, Released, Revoked}

// legal is the transition table of a request: from → the statuses it may
// move to. A request is created Pending, Accepted, Granted or Denied.
var legal = map[Status][]Status{
	Pending:  {Accepted, Granted, Denied, Cancelled},
	Accepted: {Granted, Denied, Cancelled},
	Granted:  {Released, Revoked},
}

// CanMove reports whether a request in status from may move to status to.
func CanMove(from, to Status) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether s ends a request.
func (s Status) Final() bool { return len(legal[s]) == 0 }

// Waiting reports whether a request in status s is in a floor's queue.
func (s Status) Waiting() bool { return s == Pending || s == Accepted }
