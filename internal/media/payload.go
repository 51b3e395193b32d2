package media

import "encoding/binary"

// PayloadOffset is where an RTP packet's payload starts (RFC 3550 §5.1:
// the fixed header, the CSRCs, then the header extension), or false if
// b is too short to hold what its header announces. Padding is not
// taken off the end.
//
//	|V=2|P|X|  CC   |M|     PT      |       sequence number         |
//	|                           timestamp                           |
//	|                             SSRC                              |
//	|                     CSRC list (CC × 4 bytes)                  |
//	|      defined by profile       |  extension length (words)     |  if X
//	|                        extension                              |
func PayloadOffset(b []byte) (int, bool) {
	if len(b) < 12 {
		return 0, false
	}
	off := 12 + 4*int(b[0]&0x0f)
	if b[0]&0x10 != 0 {
		if len(b) < off+4 {
			return 0, false
		}
		off += 4 + 4*int(binary.BigEndian.Uint16(b[off+2:]))
	}
	return off, off <= len(b)
}
