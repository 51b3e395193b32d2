package recbench

import (
	"encoding/binary"
	"time"

	"github.com/convene/convene/internal/rtctest"
)

// A load packet's payload, after its send time (rtctest.Stamp):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 send time, ns since 1970 (8 bytes)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        magic "CvRb"                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        stream                                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        packet number in the stream            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The send time is at 0 in audio and after the VP8 descriptor and frame
// header in video (rtctest.StampAt). Numbers count from 0 with no gap: all
// below a stream's next number were sent.
const (
	magic   = "CvRb"
	markLen = 4 + 4 + 4
)

// markAt is where the mark starts in a payload.
func markAt(video bool) int { return rtctest.StampAt(video) + 8 }

// minPayload is the smallest payload that holds the stamp and the mark.
func minPayload(video bool) int { return markAt(video) + markLen }

// putMark stamps payload with the time now and marks it as packet n of
// stream.
func putMark(payload []byte, video bool, stream, n uint32, now time.Time) {
	rtctest.Stamp(payload, video, now)
	at := markAt(video)
	copy(payload[at:], magic)
	binary.BigEndian.PutUint32(payload[at+4:], stream)
	binary.BigEndian.PutUint32(payload[at+8:], n)
}

// readMark finds the mark in a recorded RTP packet. A retransmission in
// the RTX format (RFC 4588 §4) has the original sequence number, two
// bytes, before the payload: its mark is found too.
func readMark(pkt []byte) (stream, n uint32, ok bool) {
	off, ok := payloadAt(pkt)
	if !ok {
		return 0, 0, false
	}
	pl := pkt[off:]
	for _, at := range [...]int{markAt(false), markAt(true), markAt(false) + 2, markAt(true) + 2} {
		if len(pl) >= at+markLen && string(pl[at:at+4]) == magic {
			return binary.BigEndian.Uint32(pl[at+4:]), binary.BigEndian.Uint32(pl[at+8:]), true
		}
	}
	return 0, 0, false
}

// payloadAt is where an RTP packet's payload starts (RFC 3550 §5.1: the
// fixed header, CSRCs, then the header extension when X is set).
func payloadAt(pkt []byte) (int, bool) {
	if len(pkt) < 12 || pkt[0]>>6 != 2 {
		return 0, false
	}
	off := 12 + 4*int(pkt[0]&0x0f)
	if pkt[0]&0x10 != 0 {
		if len(pkt) < off+4 {
			return 0, false
		}
		off += 4 + 4*int(binary.BigEndian.Uint16(pkt[off+2:]))
	}
	if off > len(pkt) {
		return 0, false
	}
	return off, true
}
