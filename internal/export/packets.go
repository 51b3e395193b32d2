package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/convene/convene/internal/rtpdump"
)

// rtpPacket is one RTP packet of a stream. Payload is the reader's: valid
// until the next call to next.
type rtpPacket struct {
	Ticks   int64  // RTP timestamp, unwrapped, since the stream's first
	Offset  uint32 // arrival, ms after the file header's Start
	Seq     uint16
	Marker  bool
	Payload []byte
}

// packets reads a stream's RTP packets of its payload type in file order.
type packets struct {
	s *Stream
	f *os.File
	r *rtpdump.Reader
	u unwrapper
}

func openPackets(s *Stream) (*packets, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	r, err := rtpdump.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("export: %s: %w", s.Path, err)
	}
	return &packets{s: s, f: f, r: r}, nil
}

func (p *packets) Close() error { return p.f.Close() }

// next returns the next packet, io.EOF at the end (a torn last record is
// an end too).
func (p *packets) next() (rtpPacket, error) {
	for {
		rec, err := p.r.Next()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return rtpPacket{}, io.EOF
		}
		if err != nil {
			return rtpPacket{}, err
		}
		b := rec.Data
		if rec.RTCP || len(b) < 12 || b[0]>>6 != 2 || b[1]&0x7f != p.s.PT {
			continue
		}
		// RFC 3550 §5.1: CSRCs, then an extension, then padding at the end.
		n := 12 + 4*int(b[0]&0x0f)
		if b[0]&0x10 != 0 {
			if len(b) < n+4 {
				continue
			}
			n += 4 + 4*int(binary.BigEndian.Uint16(b[n+2:]))
		}
		end := len(b)
		if b[0]&0x20 != 0 && end > 0 {
			end -= int(b[end-1])
		}
		if n > end {
			continue
		}
		return rtpPacket{
			Ticks:   p.u.next(binary.BigEndian.Uint32(b[4:])),
			Offset:  rec.Offset,
			Seq:     binary.BigEndian.Uint16(b[2:]),
			Marker:  b[1]&0x80 != 0,
			Payload: b[n:end],
		}, nil
	}
}
