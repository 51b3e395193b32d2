package conversation

import (
	"errors"
	"fmt"
	"time"
)

// MemberID names a member on the wire: its index in Spec.Members.
type MemberID uint32

// Flow is one flow of a conversation with the seed's two delay constraints.
type Flow struct {
	ID   uint32
	Name string
	// Delay is δi, the desired delay: the end-to-end delay the flow
	// tolerates before its quality deteriorates.
	Delay time.Duration
	// LossDelay is λi, the loss delay: beyond it delivery is useless.
	LossDelay time.Duration
}

// Spec describes a conversation.
type Spec struct {
	ID      uint64
	Members []string // a member's MemberID is its index here
	Flows   []Flow
	// Skew is ε, the largest clock skew between members.
	Skew time.Duration
	// Delta, when set, is the causality interval Δ chosen by the provider;
	// it must satisfy Δ1+2ε ≤ Δ < Δ2. Zero means Δ1+2ε.
	Delta time.Duration
	// Buffer caps the messages a Receiver holds back; 0 means 1024.
	Buffer int
}

// DefaultBuffer is the cap on held-back messages when Spec.Buffer is 0.
const DefaultBuffer = 1024

// Conversation is a validated Spec with its Δ.
type Conversation struct {
	spec   Spec
	delta  time.Duration
	flows  map[uint32]Flow
	buffer int
}

// New validates spec and computes Δ as the seed defines it:
// Δ1 = max δi, Δ2 = min λi, Δ = max(Spec.Delta, Δ1+2ε), which must stay
// below Δ2.
func New(spec Spec) (*Conversation, error) {
	if len(spec.Members) == 0 {
		return nil, errors.New("conversation: no members")
	}
	if len(spec.Flows) == 0 {
		return nil, errors.New("conversation: no flows")
	}
	if spec.Skew < 0 || spec.Delta < 0 || spec.Buffer < 0 {
		return nil, errors.New("conversation: negative skew, delta or buffer")
	}
	c := &Conversation{spec: spec, flows: make(map[uint32]Flow, len(spec.Flows)), buffer: spec.Buffer}
	if c.buffer == 0 {
		c.buffer = DefaultBuffer
	}
	var d1, d2 time.Duration
	for i, f := range spec.Flows {
		if _, dup := c.flows[f.ID]; dup {
			return nil, fmt.Errorf("conversation: flow %d twice", f.ID)
		}
		if f.Delay <= 0 || f.LossDelay <= f.Delay {
			return nil, fmt.Errorf("conversation: flow %d needs 0 < δ < λ", f.ID)
		}
		c.flows[f.ID] = f
		if i == 0 || f.Delay > d1 {
			d1 = f.Delay
		}
		if i == 0 || f.LossDelay < d2 {
			d2 = f.LossDelay
		}
	}
	c.delta = max(spec.Delta, d1+2*spec.Skew)
	if c.delta >= d2 {
		return nil, fmt.Errorf("conversation: Δ %v is not below Δ2 = min λ = %v", c.delta, d2)
	}
	return c, nil
}

// Delta is the conversation's causality interval Δ.
func (c *Conversation) Delta() time.Duration { return c.delta }

// Spec returns the conversation's spec.
func (c *Conversation) Spec() Spec { return c.spec }

// Member returns the MemberID of name.
func (c *Conversation) Member(name string) (MemberID, bool) {
	for i, m := range c.spec.Members {
		if m == name {
			return MemberID(i), true
		}
	}
	return 0, false
}
