package broker

import (
	"sort"
	"sync"
)

// Broker holds the rooms of a node.
type Broker struct {
	mu    sync.RWMutex
	rooms map[string]*Room
}

// New returns a broker with no rooms.
func New() *Broker { return &Broker{rooms: map[string]*Room{}} }

// Open returns the room with the given ID, creating it if needed.
func (b *Broker) Open(id string) *Room {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.rooms[id]
	if !ok {
		r = NewRoom(id)
		b.rooms[id] = r
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
	b.mu.Unlock()
	if r != nil {
		r.Close()
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
