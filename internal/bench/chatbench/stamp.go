package chatbench

import (
	"encoding/binary"
	"time"
)

// Stamp is what the benchmark puts at the head of each message's payload:
// the step it belongs to (a message of an earlier step, delivered late, is
// not counted in this one) and its send time, for the end-to-end latency
// (the header's Sent has milliseconds only).
//
//	+---------+-------------------+--------------------------+
//	| step    | sent, Unix ns     | filler ('.') up to size  |
//	| 2 bytes | 8 bytes, big end. |                          |
//	+---------+-------------------+--------------------------+
type Stamp struct {
	Step uint16
	Sent time.Time
}

// StampLen is the stamp's size: the least payload.
const StampLen = 10

// AppendTo appends the stamp and filler up to size bytes to b.
func (s Stamp) AppendTo(b []byte, size int) []byte {
	b = binary.BigEndian.AppendUint16(b, s.Step)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Sent.UnixNano()))
	for range size - StampLen {
		b = append(b, '.')
	}
	return b
}

// ReadStamp reads the stamp at the head of p; ok is false when p is too
// short to hold one.
func ReadStamp(p []byte) (s Stamp, ok bool) {
	if len(p) < StampLen {
		return Stamp{}, false
	}
	return Stamp{Step: binary.BigEndian.Uint16(p), Sent: time.Unix(0, int64(binary.BigEndian.Uint64(p[2:])))}, true
}
