package hls

import "errors"

// Errors of depacketizer.push.
var (
	errShort  = errors.New("hls: an RTP packet too short for its header")
	errNALU   = errors.New("hls: an H.264 RTP payload of a type we do not take")
	errLost   = errors.New("hls: a packet of the access unit was lost")
	errTooBig = errors.New("hls: an access unit over its size limit")
)

// maxAU bounds an access unit's bytes, maxNALUs its NAL units: the child
// makes 1 Mbit/s H.264, a keyframe of a few tens of kilobytes.
const (
	maxAU    = 4 << 20
	maxNALUs = 128
)

// depacketizer rebuilds H.264 access units from the RTP of the ffmpeg
// child (RFC 6184: single NAL unit packets, STAP-A, FU-A; packetization
// mode 1, what ffmpeg's RTP muxer makes). An access unit is the NAL units
// of one timestamp; the marker bit ends it. A lost packet (a gap in the
// sequence numbers) drops the unit it belongs to; the caller then waits
// for a keyframe. It belongs to one goroutine.
type depacketizer struct {
	started bool
	seq     uint16 // the last sequence number
	ssrc    uint32
	ts      uint32 // of the unit being built
	open    bool   // a unit is being built (no marker since its first packet)
	nalus   [][]byte
	size    int
	fu      []byte // the FU-A NAL unit being built (nil for none)
	broken  bool   // the unit being built lost a packet
}

// au is a rebuilt access unit: its NAL units (without start codes) and
// its RTP timestamp and SSRC.
type au struct {
	nalus [][]byte
	ts    uint32
	ssrc  uint32
}

// push takes one RTP packet and returns the access units it ends: a
// packet of another timestamp than the unit being built ends that one
// (its marker was lost), and a packet with the marker ends its own. An
// error says a unit was lost or a payload was bad: the caller waits for
// a keyframe.
func (d *depacketizer) push(b []byte) (out []*au, err error) {
	if len(b) < 12 || b[0]>>6 != 2 {
		return nil, errShort
	}
	cc := int(b[0] & 0x0f)
	off := 12 + 4*cc
	if b[0]&0x10 != 0 { // extension
		if len(b) < off+4 {
			return nil, errShort
		}
		off += 4 + 4*(int(b[off+2])<<8|int(b[off+3]))
	}
	end := len(b)
	if b[0]&0x20 != 0 { // padding
		if end <= off {
			return nil, errShort
		}
		end -= int(b[end-1])
	}
	if off >= end {
		return nil, errShort
	}
	marker := b[1]&0x80 != 0
	seq := uint16(b[2])<<8 | uint16(b[3])
	ts := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	ssrc := uint32(b[8])<<24 | uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])

	if !d.started || ssrc != d.ssrc {
		d.reset(ts)
		d.ssrc, d.started, d.open = ssrc, true, true
	} else {
		diff := int16(seq - d.seq)
		if diff <= 0 {
			return nil, nil // a duplicate or late packet
		}
		gap := diff > 1
		if !d.open || ts != d.ts {
			// A new unit; the one before ended without its marker
			// (kept unless packets were lost between them).
			if d.open && !gap {
				if u := d.finish(); u != nil {
					out = append(out, u)
				}
			} else if d.open && len(d.nalus) > 0 {
				err = errLost
			}
			d.reset(ts)
			d.open = true
		}
		if gap {
			d.broken = true
			err = errLost
		}
	}
	d.seq = seq
	if perr := d.payload(b[off:end]); perr != nil {
		d.broken = true
		err = perr
	}
	if marker {
		if u := d.finish(); u != nil {
			out = append(out, u)
		} else if err == nil {
			err = errLost
		}
		d.reset(ts)
		d.open = false
	}
	return out, err
}

// payload adds one packet's payload to the unit being built.
func (d *depacketizer) payload(p []byte) error {
	switch typ := p[0] & 0x1f; {
	case typ >= 1 && typ <= 23:
		d.fu = nil
		return d.add(p)
	case typ == 24: // STAP-A
		d.fu = nil
		p = p[1:]
		for len(p) > 0 {
			if len(p) < 2 {
				return errShort
			}
			n := int(p[0])<<8 | int(p[1])
			if n == 0 || len(p) < 2+n {
				return errShort
			}
			if err := d.add(p[2 : 2+n]); err != nil {
				return err
			}
			p = p[2+n:]
		}
		return nil
	case typ == 28: // FU-A
		if len(p) < 3 {
			return errShort
		}
		start, stop := p[1]&0x80 != 0, p[1]&0x40 != 0
		if start {
			d.fu = append(make([]byte, 0, 1500), p[0]&0xe0|p[1]&0x1f)
		} else if d.fu == nil {
			return errLost // the start was lost
		}
		if len(d.fu)+len(p)-2 > maxAU {
			d.fu = nil
			return errTooBig
		}
		d.fu = append(d.fu, p[2:]...)
		if stop {
			n := d.fu
			d.fu = nil
			return d.add(n)
		}
		return nil
	default:
		return errNALU
	}
}

func (d *depacketizer) add(n []byte) error {
	if d.size+len(n) > maxAU || len(d.nalus) >= maxNALUs {
		return errTooBig
	}
	d.nalus = append(d.nalus, append([]byte(nil), n...))
	d.size += len(n)
	return nil
}

// finish is the unit built so far, nil if it is empty or lost a packet.
func (d *depacketizer) finish() *au {
	if d.broken || len(d.nalus) == 0 || d.fu != nil {
		return nil
	}
	return &au{nalus: d.nalus, ts: d.ts, ssrc: d.ssrc}
}

func (d *depacketizer) reset(ts uint32) {
	d.ts, d.nalus, d.size, d.fu, d.broken = ts, nil, 0, nil, false
}
