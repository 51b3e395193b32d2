package conversation

import "fmt"

// Status says how a message was delivered.
type Status uint8

const (
	// Delivered: in per-sender and Δ-causal order, before its deadline.
	Delivered Status = iota
	// Expired: held until its deadline, then delivered with Missing naming
	// what never came (the seed's exception).
	Expired
	// Overflow: forced out before its deadline because the receiver held
	// Spec.Buffer messages; Missing names what it lacked.
	Overflow
	// Late: arrived after its deadline (then in order, with Missing if its
	// dependencies had not come), or after it had been declared missing
	// (then out of order, after what depended on it).
	Late
)

var statusNames = [...]string{"delivered", "expired", "overflow", "late"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", s)
}

// Gap names missing messages: Member's sequence numbers First..Last.
type Gap struct {
	Member      MemberID
	First, Last uint64
}

// Delivery is a message handed to the application.
type Delivery struct {
	Message Message
	Status  Status
	Missing []Gap // what it depended on and was not delivered before it
}
