package export

import (
	"errors"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pion/rtp/codecs"
)

// vp8Frames reassembles a VP8 stream's frames from its packets (RFC 7741:
// a frame is the packets of one timestamp, from the one with S=1, PID=0
// to the one with the marker bit). A frame with a sequence gap is
// dropped, and so is every frame after it up to the next keyframe.
type vp8Frames struct {
	s       *Stream
	ps      *packets
	frame   []byte
	ticks   int64
	seq     uint16
	started bool // a frame is being assembled
	broken  bool // it lost a packet
	needKey bool
	pending *rtpPacket // read ahead: the first packet of the next frame
	Dropped int
}

// vp8Streams lists the VP8 streams to export, best first: the session's
// composite (everyone's cameras in one picture) if one was recorded,
// then the most packets, a lower simulcast layer on a tie. The export
// takes the first that holds a keyframe (a stream recorded before its
// sender answered the recorder's keyframe request holds none and cannot
// be decoded).
func vp8Streams(rec *Recording) []*Stream {
	var vs []*Stream
	for _, s := range rec.Video {
		if strings.EqualFold(s.Codec, "video/VP8") {
			vs = append(vs, s)
		}
	}
	sort.SliceStable(vs, func(i, j int) bool {
		if ci, cj := vs[i].Sidecar.Source == "composite", vs[j].Sidecar.Source == "composite"; ci != cj {
			return ci
		}
		if vs[i].Packets != vs[j].Packets {
			return vs[i].Packets > vs[j].Packets
		}
		return vs[i].Sidecar.Layer < vs[j].Sidecar.Layer
	})
	return vs
}

// vp8Picture opens the first of streams that holds a keyframe, with the
// size of its picture; nil if none does.
func vp8Picture(streams []*Stream) (v *vp8Frames, width, height int, err error) {
	for _, s := range streams {
		probe, err := newVP8Frames(s)
		if err != nil {
			return nil, 0, 0, err
		}
		for {
			f, _, key, err := probe.Next()
			if err != nil {
				break
			}
			if w, h, ok := vp8Size(f); key && ok {
				width, height = w, h
				break
			}
		}
		probe.Close()
		if width > 0 {
			v, err := newVP8Frames(s)
			return v, width, height, err
		}
	}
	return nil, 0, 0, nil
}

func newVP8Frames(s *Stream) (*vp8Frames, error) {
	ps, err := openPackets(s)
	if err != nil {
		return nil, err
	}
	return &vp8Frames{s: s, ps: ps, needKey: true}, nil
}

func (v *vp8Frames) Close() error { return v.ps.Close() }

// Next returns the next whole frame (valid until the next call), its
// time on the time line and whether it is a keyframe; io.EOF at the end.
func (v *vp8Frames) Next() ([]byte, time.Duration, bool, error) {
	for {
		var p rtpPacket
		if v.pending != nil {
			p, v.pending = *v.pending, nil
		} else {
			var err error
			p, err = v.ps.next()
			if errors.Is(err, io.EOF) {
				if f, at, key, ok := v.finish(); ok {
					return f, at, key, nil
				}
				return nil, 0, false, io.EOF
			}
			if err != nil {
				return nil, 0, false, err
			}
		}
		if v.started && p.Ticks != v.ticks {
			// A new timestamp without the last one's marker: its end was lost.
			v.broken = true
			q := p
			q.Payload = append([]byte(nil), p.Payload...)
			v.pending = &q
			if f, at, key, ok := v.finish(); ok {
				return f, at, key, nil
			}
			continue
		}
		var d codecs.VP8Packet
		payload, err := d.Unmarshal(p.Payload)
		if err != nil {
			v.broken = true
			continue
		}
		if d.S == 1 && d.PID == 0 {
			if v.started { // a second start in one timestamp
				v.broken = true
			}
			v.started, v.broken, v.ticks, v.frame = true, false, p.Ticks, v.frame[:0]
		} else if !v.started || p.Seq != v.seq+1 {
			v.broken = true
		}
		if !v.started {
			continue
		}
		v.seq = p.Seq
		v.frame = append(v.frame, payload...)
		if p.Marker {
			if f, at, key, ok := v.finish(); ok {
				return f, at, key, nil
			}
		}
	}
}

// finish ends the frame being assembled; ok is false when there is none
// to return (none started, broken, or waiting for a keyframe).
func (v *vp8Frames) finish() ([]byte, time.Duration, bool, bool) {
	if !v.started {
		return nil, 0, false, false
	}
	v.started = false
	key := len(v.frame) > 0 && v.frame[0]&0x01 == 0 // RFC 6386 §9.1: P, inverse keyframe flag
	if v.broken || len(v.frame) == 0 || (v.needKey && !key) {
		v.Dropped++
		v.needKey = true
		return nil, 0, false, false
	}
	v.needKey = false
	return v.frame, v.s.At(v.ticks), key, true
}

// vp8Size reads the width and height of a VP8 keyframe (RFC 6386 §9.1:
// a 3-byte frame tag, the start code 9d 01 2a, then 14-bit width and
// height, little-endian, under 2-bit scales).
func vp8Size(f []byte) (w, h int, ok bool) {
	if len(f) < 10 || f[0]&0x01 != 0 || f[3] != 0x9d || f[4] != 0x01 || f[5] != 0x2a {
		return 0, 0, false
	}
	w = int(uint16(f[6])|uint16(f[7])<<8) & 0x3fff
	h = int(uint16(f[8])|uint16(f[9])<<8) & 0x3fff
	return w, h, w > 0 && h > 0
}

// sniffVP8 reports whether one of the stream's first 300 packets starts a
// VP8 keyframe: a payload descriptor with S=1, PID=0, then a keyframe
// header with its start code.
func sniffVP8(s *Stream) bool {
	ps, err := openPackets(s)
	if err != nil {
		return false
	}
	defer ps.Close()
	for range 300 {
		p, err := ps.next()
		if err != nil {
			return false
		}
		var d codecs.VP8Packet
		payload, err := d.Unmarshal(p.Payload)
		if err != nil || d.S != 1 || d.PID != 0 {
			continue
		}
		if _, _, ok := vp8Size(payload); ok {
			return true
		}
	}
	return false
}
