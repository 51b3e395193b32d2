package media

import (
	"encoding/binary"
	"strings"
)

// Keyframe reports whether an RTP payload of codec mime ("video/VP8",
// "video/H264") starts a keyframe; any other codec counts as one. The sfu
// throttles keyframe requests with it, playback seeks to one.
func Keyframe(mime string, b []byte) bool {
	switch {
	case strings.EqualFold(mime, "video/VP8"):
		return vp8Keyframe(b)
	case strings.EqualFold(mime, "video/H264"):
		return h264Keyframe(b)
	}
	return true
}

// vp8Keyframe parses the VP8 payload descriptor (RFC 7741 §4.2) and the
// payload header's inverse key frame flag.
func vp8Keyframe(b []byte) bool {
	if len(b) < 1 {
		return false
	}
	x, s, pid := b[0]&0x80 != 0, b[0]&0x10 != 0, b[0]&0x07
	if !s || pid != 0 {
		return false
	}
	i := 1
	if x {
		if len(b) < 2 {
			return false
		}
		ext := b[1]
		i = 2
		if ext&0x80 != 0 { // I: picture ID
			if len(b) <= i {
				return false
			}
			if b[i]&0x80 != 0 {
				i += 2
			} else {
				i++
			}
		}
		if ext&0x40 != 0 { // L: TL0PICIDX
			i++
		}
		if ext&0x30 != 0 { // T or K
			i++
		}
	}
	return len(b) > i && b[i]&0x01 == 0
}

// h264Keyframe finds an IDR slice or an SPS in a single NAL unit, a
// STAP-A or the first fragment of an FU-A (RFC 6184).
func h264Keyframe(b []byte) bool {
	if len(b) < 1 {
		return false
	}
	switch n := b[0] & 0x1f; n {
	case 5, 7:
		return true
	case 24: // STAP-A
		for i := 1; i+2 < len(b); {
			size := int(binary.BigEndian.Uint16(b[i:]))
			if i+2 < len(b) {
				if t := b[i+2] & 0x1f; t == 5 || t == 7 {
					return true
				}
			}
			i += 2 + size
		}
	case 28: // FU-A
		return len(b) > 1 && b[1]&0x80 != 0 && (b[1]&0x1f == 5 || b[1]&0x1f == 7)
	}
	return false
}
