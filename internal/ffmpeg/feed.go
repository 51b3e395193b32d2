package ffmpeg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Clock is the wall clock a child's feeds share: every feed's timestamps
// and sender reports count from its epoch.
type Clock struct{ epoch time.Time }

// NewClock starts a clock now.
func NewClock() *Clock { return &Clock{epoch: time.Now()} }

// rtpAt is the RTP time of t at rate, counted from the epoch.
func (c *Clock) rtpAt(t time.Time, rate uint32) uint32 {
	return uint32(uint64(t.Sub(c.epoch)) * uint64(rate) / uint64(time.Second))
}

// Stream describes what a Feed sends: the payload type and codec the SDP
// names, and the RTP clock rate.
type Stream struct {
	Kind  media.Kind
	PT    uint8
	Codec string // "opus/48000/2", "VP8/90000", "H264/90000"
	Rate  uint32
	// MIME tells keyframes apart ("video/VP8", "video/H264"); a feed that
	// changes to a new source video track waits for its keyframe.
	MIME string
	// Port is the child's RTP port on 127.0.0.1 (RTCP on Port+1).
	Port int
}

// Feed sends one stream to a child. It is a broker.Sink: the source is
// whatever delivers to it, a tap of a track or a mixer's output.
type Feed struct {
	st    Stream
	clock *Clock
	conn  *net.UDPConn
	rtp   netip.AddrPort
	rtcp  netip.AddrPort
	ssrc  uint32

	mu       sync.Mutex
	src      *broker.Track // the source of the last packet
	waitKey  bool
	waitFrom time.Time // since when it waits for a keyframe
	based    bool
	srcTS    uint32 // a source timestamp …
	outTS    uint32 // … and the one it went out as
	srcSeq   uint16
	outSeq   uint16
	nextSeq  uint16 // the sequence number after the last one sent
	lastOut  uint32 // the last timestamp sent
	packets  uint32
	octets   uint32
	buf      []byte
	rtcpBuf  [28]byte
	sendErrs uint64
}

// NewFeed opens a socket that sends st to the child on 127.0.0.1.
func NewFeed(st Stream, clock *Clock) (*Feed, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("ffmpeg: feed socket: %w", err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	return &Feed{st: st, clock: clock, conn: c, rtp: netip.AddrPortFrom(lo, uint16(st.Port)),
		rtcp: netip.AddrPortFrom(lo, uint16(st.Port+1)), ssrc: rand.Uint32(), nextSeq: uint16(rand.Uint32()),
		buf: make([]byte, 1500)}, nil
}

// Stream is what the feed sends.
func (f *Feed) Stream() Stream { return f.st }

// Close closes the feed's socket.
func (f *Feed) Close() { f.conn.Close() }

// Deliver sends a packet of from (nil for a mixer's output) to the child
// with the feed's SSRC, sequence numbers and timestamps; it takes the
// caller's reference.
func (f *Feed) Deliver(pk *media.Packet, from *broker.Track) {
	defer pk.Release()
	b := pk.Bytes()
	off, ok := media.PayloadOffset(b)
	if !ok || b[0]>>6 != 2 || off >= len(b) || len(b) > len(f.buf) {
		return
	}
	now := time.Now()
	seq, ts := binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:])
	f.mu.Lock()
	defer f.mu.Unlock()
	if from != f.src {
		f.src, f.based = from, false
		f.wait(f.st.Kind == media.Video, now)
		if from != nil && f.waitKey {
			from.RequestKeyframe()
		}
	}
	if f.waitKey {
		if !media.Keyframe(f.st.MIME, b[off:]) {
			return
		}
		f.wait(false, now)
	}
	// A new source, or a jump of more than a second from the wall clock
	// (a restarted mixer, a sender's new timestamps), starts a new run at
	// the clock's time; within a run the source's own spacing holds.
	wall := f.clock.rtpAt(now, f.st.Rate)
	out := f.outTS + (ts - f.srcTS)
	if d := int32(out - wall); !f.based || d > int32(f.st.Rate) || d < -int32(f.st.Rate) {
		if f.based && wall == f.lastOut {
			wall++
		}
		f.srcTS, f.outTS, f.srcSeq, f.outSeq, f.based = ts, wall, seq, f.nextSeq, true
		out = wall
	}
	oseq := f.outSeq + (seq - f.srcSeq)
	if int16(oseq-f.nextSeq) >= 0 {
		f.nextSeq = oseq + 1
	}
	f.lastOut = out
	w := f.buf[:len(b)]
	copy(w, b)
	w[1] = b[1]&0x80 | f.st.PT
	binary.BigEndian.PutUint16(w[2:], oseq)
	binary.BigEndian.PutUint32(w[4:], out)
	binary.BigEndian.PutUint32(w[8:], f.ssrc)
	if _, err := f.conn.WriteToUDPAddrPort(w, f.rtp); err != nil {
		f.sendErrs++
		return
	}
	f.packets++
	f.octets += uint32(len(b) - off)
}

// Report sends a sender report (RFC 3550 §6.4.1) for now, once the feed
// has sent a packet:
//
//	 0                   1                   2                   3
//	|V=2|P|  RC=0   |   PT=SR=200   |           length=6            |
//	|                         SSRC of sender                        |
//	|              NTP timestamp, most significant word             |
//	|             NTP timestamp, least significant word             |
//	|                         RTP timestamp                         |
//	|                     sender's packet count                     |
//	|                      sender's octet count                     |
func (f *Feed) Report(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.packets == 0 {
		return
	}
	b := f.rtcpBuf[:]
	b[0], b[1] = 0x80, 200
	binary.BigEndian.PutUint16(b[2:], 6)
	binary.BigEndian.PutUint32(b[4:], f.ssrc)
	binary.BigEndian.PutUint64(b[8:], ntp(now))
	binary.BigEndian.PutUint32(b[16:], f.clock.rtpAt(now, f.st.Rate))
	binary.BigEndian.PutUint32(b[20:], f.packets)
	binary.BigEndian.PutUint32(b[24:], f.octets)
	_, _ = f.conn.WriteToUDPAddrPort(b, f.rtcp)
}

// Restarted makes the next video packet wait for a keyframe (a new child
// decodes from one) and asks the source for it.
func (f *Feed) Restarted() {
	f.mu.Lock()
	src := f.src
	if f.st.Kind == media.Video {
		f.wait(true, time.Now())
	}
	f.mu.Unlock()
	if src != nil {
		src.RequestKeyframe()
	}
}

// wait sets whether the feed waits for a keyframe, since now if it did
// not already (under mu).
func (f *Feed) wait(on bool, now time.Time) {
	if on && !f.waitKey {
		f.waitFrom = now
	}
	f.waitKey = on
}

// Keyless is how long the feed has waited, at now, for its source's
// keyframe, sending nothing meanwhile; 0 if it does not wait.
func (f *Feed) Keyless(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.waitKey {
		return 0
	}
	return now.Sub(f.waitFrom)
}

// AskKeyframe asks the source for a keyframe and, unlike Restarted, drops
// nothing meanwhile: a child still probing its input may have had the
// last keyframe and need what follows it.
func (f *Feed) AskKeyframe() {
	f.mu.Lock()
	src := f.src
	f.mu.Unlock()
	if src != nil {
		src.RequestKeyframe()
	}
}

// ntp is t as a 64-bit NTP timestamp (seconds since 1900, 32.32).
func ntp(t time.Time) uint64 {
	const offset = 2208988800 // 1900 to 1970
	ns := t.UnixNano()
	sec := uint64(ns/1e9) + offset
	frac := uint64(ns%1e9) << 32 / 1e9
	return sec<<32 | frac
}

// FreePorts returns n even UDP ports on 127.0.0.1 whose odd neighbours
// were free too, for a child's RTP and RTCP. They are closed again when
// it returns: a port could be taken before the child binds it, which
// makes the child fail and be started again on the same ports.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var held []*net.UDPConn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 100; tries++ {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		held = append(held, c)
		p := c.LocalAddr().(*net.UDPAddr).Port
		if p%2 != 0 {
			continue
		}
		c2, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p + 1})
		if err != nil {
			continue
		}
		held = append(held, c2)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("ffmpeg: no free even port pair on 127.0.0.1")
	}
	return ports, nil
}

// SDP describes the feeds' streams for the child (ffmpeg -i file.sdp).
func SDP(streams ...Stream) string {
	s := "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=convene\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
	for _, st := range streams {
		kind := "audio"
		if st.Kind == media.Video {
			kind = "video"
		}
		s += fmt.Sprintf("m=%s %d RTP/AVP %d\r\na=rtpmap:%d %s\r\n", kind, st.Port, st.PT, st.PT, st.Codec)
		if st.MIME == "video/H264" {
			s += fmt.Sprintf("a=fmtp:%d packetization-mode=1\r\n", st.PT)
		}
	}
	return s
}

// VideoStream is the stream a feed of track t sends: its codec (VP8
// unless the track says H.264) as payload type 96.
func VideoStream(t *broker.Track, port int) Stream {
	st := Stream{Kind: media.Video, PT: 96, Codec: "VP8/90000", Rate: 90000, MIME: "video/VP8", Port: port}
	if t != nil && strings.EqualFold(t.Info().Codec, "video/H264") {
		st.Codec, st.MIME = "H264/90000", "video/H264"
	}
	return st
}
