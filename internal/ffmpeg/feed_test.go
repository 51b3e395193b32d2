package ffmpeg

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// child listens where a Feed sends, as ffmpeg would.
func child(t *testing.T) (port int, rtp, rtcp *net.UDPConn) {
	t.Helper()
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := func(p int) *net.UDPConn {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return ports[0], listen(ports[0]), listen(ports[0] + 1)
}

// vp8 is an RTP packet of a VP8 frame's first packet: a keyframe or not.
func vp8(seq uint16, ts, ssrc uint32, key bool) *media.Packet {
	pk := media.NewPacket()
	b := pk.Buffer()
	b[0], b[1] = 0x80, 0x80|100
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], ts)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	b[12] = 0x10 // S=1, PID=0
	b[13] = 0x01 // P=1: an interframe
	if key {
		b[13] = 0x00
	}
	pk.SetLen(20)
	return pk
}

func read(t *testing.T, c *net.UDPConn) []byte {
	t.Helper()
	buf := make([]byte, 1500)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("nothing reached the child: %v", err)
	}
	return buf[:n]
}

// TestFeedSwitch: a feed waits for a keyframe of each new source and
// sends both sources as one stream: its own SSRC and payload type, the
// sequence numbers going on by one across the change, the timestamps by
// the sources' own spacing within a run and near the wall clock after
// the change; a sender report names the same SSRC.
func TestFeedSwitch(t *testing.T) {
	port, rtp, rtcp := child(t)
	room := broker.New().Open("r")
	a, err := room.Join(broker.Member{ID: "a", Kind: media.Video, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := room.Join(broker.Member{ID: "b", Kind: media.Video, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(VideoStream(a, port), NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	f.Deliver(vp8(10, 5000, 1, false), a) // not a keyframe: held back
	f.Deliver(vp8(11, 5000, 1, true), a)
	f.Deliver(vp8(12, 8000, 1, false), a)
	p1, p2 := read(t, rtp), read(t, rtp)
	ssrc := binary.BigEndian.Uint32(p1[8:])
	if binary.BigEndian.Uint32(p2[8:]) != ssrc || p1[1]&0x7f != 96 {
		t.Fatalf("SSRC %x then %x, PT %d", ssrc, binary.BigEndian.Uint32(p2[8:]), p1[1]&0x7f)
	}
	seq1, ts1 := binary.BigEndian.Uint16(p1[2:]), binary.BigEndian.Uint32(p1[4:])
	if binary.BigEndian.Uint16(p2[2:]) != seq1+1 || binary.BigEndian.Uint32(p2[4:]) != ts1+3000 {
		t.Errorf("within a run: seq %d→%d, ts %d→%d", seq1, binary.BigEndian.Uint16(p2[2:]), ts1, binary.BigEndian.Uint32(p2[4:]))
	}

	f.Deliver(vp8(900, 1_000_000, 2, false), b) // the new camera: wait for its keyframe
	f.Deliver(vp8(901, 1_003_000, 2, true), b)
	p3 := read(t, rtp)
	if got := binary.BigEndian.Uint32(p3[8:]); got != ssrc {
		t.Errorf("after the change SSRC %x, want %x", got, ssrc)
	}
	if got := binary.BigEndian.Uint16(p3[2:]); got != seq1+2 {
		t.Errorf("after the change seq %d, want %d", got, seq1+2)
	}
	if d := int32(binary.BigEndian.Uint32(p3[4:]) - ts1); d <= 0 || d > 90000 {
		t.Errorf("after the change the timestamp moved %d, want a little forward", d)
	}

	f.Report(time.Now())
	sr := read(t, rtcp)
	if len(sr) != 28 || sr[1] != 200 || binary.BigEndian.Uint32(sr[4:]) != ssrc || binary.BigEndian.Uint32(sr[20:]) != 3 {
		t.Errorf("sender report % x", sr)
	}
}

func TestSDP(t *testing.T) {
	s := SDP(Stream{Kind: media.Audio, PT: 111, Codec: "opus/48000/2", Port: 5000},
		Stream{Kind: media.Video, PT: 96, Codec: "H264/90000", MIME: "video/H264", Port: 5002})
	for _, want := range []string{"c=IN IP4 127.0.0.1\r\n", "m=audio 5000 RTP/AVP 111\r\na=rtpmap:111 opus/48000/2\r\n",
		"m=video 5002 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("SDP lacks %q:\n%s", want, s)
		}
	}
}
