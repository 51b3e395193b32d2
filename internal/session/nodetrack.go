package session

import (
	"sync/atomic"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// NewNodeTrack opens, for a LiveOpener, a live link whose track the node
// publishes itself (a playback's stream, a composite's picture): a
// sending member of room at the link's place, owned by its member.
// Closing the link (the session does, under its lock, when the member
// leaves or the session stops) leaves the room and then calls onClose
// once; onClose must not block.
func NewNodeTrack(room *broker.Room, at Place, kind media.Kind, info broker.TrackInfo, onClose func()) (Media, *broker.Track, error) {
	t, err := room.Join(broker.Member{ID: at.LinkID, Kind: kind, Sends: true, Group: at.Group, Gated: at.Gated,
		Owner: at.Member, Info: info})
	if err != nil {
		return nil, nil, err
	}
	return &nodeTrack{member: at.Member, id: at.LinkID, room: room, track: t, onClose: onClose}, t, nil
}

type nodeTrack struct {
	member, id string
	room       *broker.Room
	track      *broker.Track
	onClose    func()
	closed     atomic.Bool
}

func (l *nodeTrack) Member() string       { return l.member }
func (l *nodeTrack) Track() *broker.Track { return l.track }
func (l *nodeTrack) Local() Local         { return Local{} }
func (l *nodeTrack) Stats() LinkStats {
	n, b := l.track.Stats()
	return LinkStats{PacketsIn: n, BytesIn: b, Dropped: map[string]uint64{"floor": l.track.GateDrops()}}
}

func (l *nodeTrack) Close() {
	if l.closed.Swap(true) {
		return
	}
	l.room.Leave(l.id)
	if l.onClose != nil {
		l.onClose()
	}
}
