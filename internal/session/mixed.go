package session

import (
	"errors"
	"fmt"
	"sync"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/mixer"
)

// mixedMedia is a plain RTP link that hears its subgroup's audio mix
// instead of every stream: the link sends into the room like any other,
// and the group's mixer delivers its mix to the link.
type mixedMedia struct {
	rtpMedia
	svc     *mixer.Service
	session string
	room    *broker.Room
	out     *mixer.Output

	mu     sync.Mutex
	detach func()
	closed bool
}

// SetGroup moves the link's mix to the mixer of group (a member moved to
// another subgroup).
func (m *mixedMedia) SetGroup(group string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if m.detach != nil {
		m.detach()
		m.detach = nil
	}
	d, err := m.svc.Attach(m.session, group, m.room, m.out)
	if errors.Is(err, mixer.ErrCapacity) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	m.detach = d
	return nil
}

func (m *mixedMedia) Close() {
	m.mu.Lock()
	m.closed = true
	if m.detach != nil {
		m.detach()
		m.detach = nil
	}
	m.mu.Unlock()
	m.rtpMedia.Close()
}

// regrouper is a link whose media follows its member to another subgroup
// by more than the room's own SetGroup (a mixed link changes mixers).
type regrouper interface{ SetGroup(group string) error }
