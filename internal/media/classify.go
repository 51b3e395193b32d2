package media

import (
	"encoding/binary"
	"strconv"
)

// Class is what a datagram turned out to be.
type Class uint8

// Datagram classes. Every class but RTP and RTCP is a reason to drop.
const (
	ClassRTP Class = iota
	ClassRTCP
	ClassTruncated  // shorter than its headers say
	ClassBadVersion // RTP/RTCP version is not 2
)

var classNames = [...]string{"rtp", "rtcp", "truncated", "bad_version"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Classify tells RTP from RTCP and checks the fixed headers. mux says whether
// RTCP may arrive on the RTP port (RFC 5761 §4: the second octet of RTCP
// packets is 192–223, which RTP payload types on a muxed port avoid).
//
// RTP fixed header (RFC 3550 §5.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=2|P|X|  CC   |M|     PT      |       sequence number         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           timestamp                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           synchronization source (SSRC) identifier            |
//	+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
//	|            contributing source (CSRC) identifiers             |
//	|                             ....                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// It allocates nothing.
func Classify(b []byte, mux bool) Class {
	if len(b) < 1 {
		return ClassTruncated
	}
	if b[0]>>6 != 2 {
		return ClassBadVersion
	}
	if mux && len(b) >= 2 && b[1] >= 192 && b[1] <= 223 {
		return ClassifyRTCP(b)
	}
	return classifyRTP(b)
}

func classifyRTP(b []byte) Class {
	if len(b) < 12 {
		return ClassTruncated
	}
	n := 12 + 4*int(b[0]&0x0f)
	if len(b) < n {
		return ClassTruncated
	}
	if b[0]&0x10 != 0 { // header extension: 16-bit profile, 16-bit length in words
		if len(b) < n+4 {
			return ClassTruncated
		}
		n += 4 + 4*int(binary.BigEndian.Uint16(b[n+2:]))
		if len(b) < n {
			return ClassTruncated
		}
	}
	if b[0]&0x20 != 0 { // padding: the last octet counts the padding octets
		pad := int(b[len(b)-1])
		if pad == 0 || n+pad > len(b) {
			return ClassTruncated
		}
	}
	return ClassRTP
}

// ClassifyRTCP checks a compound RTCP packet (RFC 3550 §6.4): every packet
// has version 2 and a length that fits in the datagram.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=2|P|   RC    |      PT       |    length (words minus one)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
func ClassifyRTCP(b []byte) Class {
	if len(b) < 4 {
		return ClassTruncated
	}
	for len(b) > 0 {
		if len(b) < 4 {
			return ClassTruncated
		}
		if b[0]>>6 != 2 {
			return ClassBadVersion
		}
		n := 4 * (int(binary.BigEndian.Uint16(b[2:])) + 1)
		if n > len(b) {
			return ClassTruncated
		}
		b = b[n:]
	}
	return ClassRTCP
}
