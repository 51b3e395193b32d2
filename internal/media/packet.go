package media

import (
	"sync"
	"sync/atomic"
)

// Kind is the media kind of a track. Audio is routed before video.
type Kind uint8

// Media kinds.
const (
	Audio Kind = iota
	Video
)

func (k Kind) String() string {
	if k == Video {
		return "video"
	}
	return "audio"
}

// ParseKind turns "audio" or "video" into a Kind.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "audio":
		return Audio, true
	case "video":
		return Video, true
	}
	return Audio, false
}

// BufSize is the size of a pooled packet buffer. A datagram that fills the
// whole buffer may have been truncated by the kernel and is dropped by readers.
const BufSize = 2048

// Packet is one received datagram in a pooled buffer shared by every
// subscriber. The buffer is owned by the pool: holders of a reference may read
// Bytes until they call Release and must never write to it.
type Packet struct {
	buf  [BufSize]byte
	n    int
	refs atomic.Int32
	// Kind of the track the packet belongs to; set by the reader.
	Kind Kind
	// RTCP is true for RTCP packets.
	RTCP bool
}

var packetPool = sync.Pool{New: func() any { return new(Packet) }}

// NewPacket returns a packet from the pool holding one reference.
func NewPacket() *Packet {
	p := packetPool.Get().(*Packet)
	p.refs.Store(1)
	return p
}

// Buffer returns the whole buffer to read a datagram into.
func (p *Packet) Buffer() []byte { return p.buf[:] }

// SetLen sets the length of the datagram held in the buffer.
func (p *Packet) SetLen(n int) { p.n = n }

// Bytes returns the datagram. The slice is valid until the holder's Release.
func (p *Packet) Bytes() []byte { return p.buf[:p.n] }

// Len returns the datagram's length.
func (p *Packet) Len() int { return p.n }

// Retain adds n references.
func (p *Packet) Retain(n int) { p.refs.Add(int32(n)) }

// Release drops one reference; the last one returns the packet to the pool.
func (p *Packet) Release() {
	switch r := p.refs.Add(-1); {
	case r == 0:
		p.n = 0
		p.Kind = Audio
		p.RTCP = false
		packetPool.Put(p)
	case r < 0:
		panic("media: packet released too often")
	}
}
