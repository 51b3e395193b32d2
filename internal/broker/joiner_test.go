package broker

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/convene/convene/internal/media"
)

// joined keeps the SSRC, sequence number and timestamp of what a Joiner
// passed on, and from which source.
type joined struct {
	mu   sync.Mutex
	got  [][3]uint32
	from []*Track
}

func (s *joined) Deliver(p *media.Packet, from *Track) {
	b := p.Bytes()
	s.mu.Lock()
	s.got = append(s.got, [3]uint32{binary.BigEndian.Uint32(b[8:]), uint32(binary.BigEndian.Uint16(b[2:])), binary.BigEndian.Uint32(b[4:])})
	s.from = append(s.from, from)
	s.mu.Unlock()
	p.Release()
}

// vp8Packet is an RTP packet of VP8: a keyframe's first packet or an
// interframe's.
func vp8Packet(ssrc uint32, seq uint16, ts uint32, key bool) *media.Packet {
	pl := []byte{0x10, 0x01, 0x00, 0x00}
	if key {
		pl = []byte{0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x02, 0x00, 0x02, 0x00}
	}
	p := media.NewPacket()
	w := p.Buffer()[:12+len(pl)]
	w[0], w[1] = 0x80, 96
	binary.BigEndian.PutUint16(w[2:], seq)
	binary.BigEndian.PutUint32(w[4:], ts)
	binary.BigEndian.PutUint32(w[8:], ssrc)
	copy(w[12:], pl)
	p.SetLen(len(w))
	p.Kind = media.Video
	return p
}

// TestJoinerMakesOneStream: the first source passes as it is; a second
// one's interframes are dropped until its keyframe, which takes over with
// the first source's SSRC and numbers that run on; the first source's
// packets after that are dropped.
func TestJoinerMakesOneStream(t *testing.T) {
	a, b := newTrack("a/video", "a", media.Video), newTrack("b/video", "b", media.Video)
	sink := &joined{}
	j := NewJoiner(sink, "video/VP8", 90000)
	j.Deliver(vp8Packet(111, 1000, 5000, true), a)
	j.Deliver(vp8Packet(111, 1001, 8000, false), a)
	j.Deliver(vp8Packet(222, 40, 900000, false), b)  // b's interframe: not yet
	j.Deliver(vp8Packet(222, 41, 903000, true), b)   // b's keyframe takes over
	j.Deliver(vp8Packet(111, 1002, 11000, false), a) // a's, now dropped
	j.Deliver(vp8Packet(222, 42, 906000, false), b)
	want := []struct {
		ssrc, seq uint32
		from      *Track
	}{{111, 1000, a}, {111, 1001, a}, {111, 1002, b}, {111, 1003, b}}
	if len(sink.got) != len(want) {
		t.Fatalf("passed %v, want %d packets", sink.got, len(want))
	}
	for i, w := range want {
		if g := sink.got[i]; g[0] != w.ssrc || g[1] != w.seq || sink.from[i] != w.from {
			t.Errorf("packet %d: ssrc %d seq %d from %s, want %d %d from %s", i, g[0], g[1], sink.from[i].ID(), w.ssrc, w.seq, w.from.ID())
		}
	}
	if ts := sink.got[2][2]; ts <= 8000 || ts > 8000+90000 {
		t.Errorf("b's first timestamp %d, want after a's last (8000), within a second", ts)
	}
	if d := sink.got[3][2] - sink.got[2][2]; d != 3000 {
		t.Errorf("b's timestamps advance by %d, want its own 3000", d)
	}
}
