package media

import "encoding/binary"

// Digits are RFC 4733's telephone events 0-15.
const Digits = "0123456789*#ABCD"

// DigitDetector finds the digits in one RTP stream's RFC 4733 telephone
// events of payload type PT: each once, at its first end packet (an end
// is sent three times with the event's timestamp; two events may share a
// timestamp when a tool replays them from recordings).
type DigitDetector struct {
	PT   uint8
	last uint64 // timestamp<<8 | event
	have bool
}

// Event reports whether b (an RTP packet) is a telephone event, and the
// digit it ends, if it newly ends one.
func (d *DigitDetector) Event(b []byte) (event bool, digit byte, ok bool) {
	if d.PT == 0 || len(b) < 12 || b[1]&0x7f != d.PT {
		return false, 0, false
	}
	off, ok := PayloadOffset(b)
	if !ok || len(b) < off+4 || b[off] >= 16 || b[off+1]&0x80 == 0 {
		return true, 0, false
	}
	key := uint64(binary.BigEndian.Uint32(b[4:]))<<8 | uint64(b[off])
	if d.have && d.last == key {
		return true, 0, false
	}
	d.last, d.have = key, true
	return true, Digits[b[off]], true
}
