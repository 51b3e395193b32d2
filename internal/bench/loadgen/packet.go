package loadgen

import "encoding/binary"

// Layout of a load packet:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=2|P|X|  CC   |M|     PT      |       sequence number         |
//	|                           timestamp                           |
//	|                             SSRC                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              send time, ns since the clock's epoch            |
//	|                          (64 bits)                            |
//	|                         meeting index                         |
//	|                   packet index in the stream                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    filler up to the packet size               |
const HeaderLen = 12 + 16

// Packet is what a receiver reads back out of a load packet.
type Packet struct {
	Seq     uint16
	TS      uint32
	SSRC    uint32
	SendNs  int64
	Meeting uint32
	Index   uint32
}

// Build writes a load packet of size bytes (at least HeaderLen) into buf
// and returns it. The filler is left as buf had it.
func Build(buf []byte, size int, pt uint8, marker bool, p Packet) []byte {
	if size < HeaderLen {
		size = HeaderLen
	}
	b := buf[:size]
	b[0] = 0x80
	b[1] = pt & 0x7f
	if marker {
		b[1] |= 0x80
	}
	binary.BigEndian.PutUint16(b[2:], p.Seq)
	binary.BigEndian.PutUint32(b[4:], p.TS)
	binary.BigEndian.PutUint32(b[8:], p.SSRC)
	binary.BigEndian.PutUint64(b[12:], uint64(p.SendNs))
	binary.BigEndian.PutUint32(b[20:], p.Meeting)
	binary.BigEndian.PutUint32(b[24:], p.Index)
	return b
}

// Parse reads a load packet; ok is false when b is not one.
func Parse(b []byte) (p Packet, ok bool) {
	if len(b) < HeaderLen || b[0]>>6 != 2 || b[0]&0x3f != 0 {
		return p, false
	}
	p.Seq = binary.BigEndian.Uint16(b[2:])
	p.TS = binary.BigEndian.Uint32(b[4:])
	p.SSRC = binary.BigEndian.Uint32(b[8:])
	p.SendNs = int64(binary.BigEndian.Uint64(b[12:]))
	p.Meeting = binary.BigEndian.Uint32(b[20:])
	p.Index = binary.BigEndian.Uint32(b[24:])
	return p, true
}
