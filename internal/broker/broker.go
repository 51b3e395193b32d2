package broker

import (
	"sort"
	"sync"
)

// Broker holds the rooms of a node.
type Broker struct {
	mu    sync.RWMutex
	rooms map[string]*Room

	// opened and removed, if set (Watch), hear of every room opened and
	// removed, outside mu.
	opened, removed func(*Room)
}

// Watch makes opened be called after a room is created by Open and
// removed after Remove closed one (the cross-node bridge spans each
// session's room). Call it before any room is opened; the functions
// must not call back into the broker's Open or Remove.
func (b *Broker) Watch(opened, removed func(*Room)) {
	b.mu.Lock()
	b.opened, b.removed = opened, removed
	b.mu.Unlock()
}

// New returns a broker with no rooms.
func New() *Broker { return &Broker{rooms: map[string]*Room{}} }

// Open returns the room with the given ID, creating it if needed.
func (b *Broker) Open(id string) *Room {
	b.mu.Lock()
	r, ok := b.rooms[id]
	if !ok {
		r = NewRoom(id)
		b.rooms[id] = r
	}
	opened := b.opened
	b.mu.Unlock()
	if !ok && opened != nil {
		opened(r)
	}
	return r
}

// Room returns the room with the given ID, or nil.
func (b *Broker) Room(id string) *Room {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.rooms[id]
}

// Remove closes the room and forgets it. Its members must leave on their own.
func (b *Broker) Remove(id string) {
	b.mu.Lock()
	r := b.rooms[id]
	delete(b.rooms, id)
	removed := b.removed
	b.mu.Unlock()
	if r != nil {
		r.Close()
		if removed != nil {
			removed(r)
		}
	}
}

// Rooms returns every room ordered by ID.
func (b *Broker) Rooms() []*Room {
	b.mu.RLock()
	rs := make([]*Room, 0, len(b.rooms))
	for _, r := range b.rooms {
		rs = append(rs, r)
	}
	b.mu.RUnlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	return rs
}
