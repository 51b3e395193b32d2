package recorder

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/rtpdump"
)

// rtp builds an RTP packet whose payload tells it apart.
func rtp(pt uint8, seq uint16, ssrc uint32, size int) []byte {
	b := make([]byte, 12+size)
	b[0], b[1] = 0x80, pt
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*960)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	for i := 12; i < len(b); i++ {
		b[i] = byte(int(seq) * i)
	}
	return b
}

// senderReport builds an RTCP SR from ssrc followed by an empty SDES.
func senderReport(ssrc uint32, ntp uint64, ts uint32) []byte {
	b := make([]byte, 28+8)
	b[0], b[1] = 0x80, 200
	binary.BigEndian.PutUint16(b[2:], 6)
	binary.BigEndian.PutUint32(b[4:], ssrc)
	binary.BigEndian.PutUint64(b[8:], ntp)
	binary.BigEndian.PutUint32(b[16:], ts)
	binary.BigEndian.PutUint32(b[20:], 7)
	binary.BigEndian.PutUint32(b[24:], 700)
	b[28], b[29] = 0x81, 202
	binary.BigEndian.PutUint16(b[30:], 1)
	binary.BigEndian.PutUint32(b[32:], ssrc)
	return b
}

func packet(b []byte) *media.Packet {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), b))
	return p
}

// readAll reads a stream file: its records (copied) and the error that
// ended it (nil at a clean end).
func readAll(t *testing.T, path string) ([]rtpdump.Packet, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := rtpdump.NewReader(f)
	if err != nil {
		return nil, err
	}
	var out []rtpdump.Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		p.Data = append([]byte(nil), p.Data...)
		out = append(out, p)
	}
}

func readSidecar(t *testing.T, dir, name string) *Sidecar {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSidecar(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func isTorn(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }
