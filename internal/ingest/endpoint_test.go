package ingest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// taps collects what a room's tracks carry, as the recorder does.
type taps struct {
	mu   sync.Mutex
	rtp  map[string][][]byte // by publisher
	rtcp [][]byte
	info map[string]broker.TrackInfo
}

func tapRoom(t *testing.T, room *broker.Room) *taps {
	t.Helper()
	tp := &taps{rtp: map[string][][]byte{}, info: map[string]broker.TrackInfo{}}
	var mu sync.Mutex
	tapped := map[*broker.Track]bool{}
	var scan func()
	sink := broker.SinkFunc(func(p *media.Packet, from *broker.Track) {
		tp.mu.Lock()
		b := append([]byte(nil), p.Bytes()...)
		if from == nil {
			tp.rtcp = append(tp.rtcp, b)
		} else {
			tp.rtp[from.Publisher()] = append(tp.rtp[from.Publisher()], b)
			tp.info[from.Publisher()] = from.Info()
		}
		tp.mu.Unlock()
		p.Release()
	})
	scan = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, tr := range room.Tracks() {
			if !tapped[tr] {
				tapped[tr] = true
				room.Tap(tr, "test-tap", sink)
			}
		}
	}
	for _, k := range []media.Kind{media.Audio, media.Video} {
		if _, err := room.Join(broker.Member{ID: "watch/" + k.String(), Kind: k, Receives: true, Layered: true,
			Sink: broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release() }), RTCPSink: sink, OnChange: scan}); err != nil {
			t.Fatal(err)
		}
	}
	return tp
}

func (tp *taps) count(pub string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.rtp[pub])
}

func rtpPacket(pt uint8, seq uint16, ssrc uint32, payload int) []byte {
	b := make([]byte, 12+payload)
	b[0] = 0x80
	b[1] = pt
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*960)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	for i := 12; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
	return b
}

func senderReport(ssrc uint32) []byte {
	b := make([]byte, 28)
	b[0], b[1] = 0x80, 200
	binary.BigEndian.PutUint16(b[2:], 6)
	binary.BigEndian.PutUint32(b[4:], ssrc)
	return b
}

func udpFrom(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func open(t *testing.T, cfg Config) (*Endpoint, *taps) {
	t.Helper()
	room := broker.NewRoom("test")
	tp := tapRoom(t, room)
	cfg.Room, cfg.Addr = room, netip.MustParseAddr("127.0.0.1")
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, tp
}

func TestStreamsBecomeTracksWithTheirCodec(t *testing.T) {
	pts, err := ParsePayloadTypes(map[string]string{"96": "VP8/90000", "97": "opus/48000/2"})
	if err != nil {
		t.Fatal(err)
	}
	e, tp := open(t, Config{Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, PayloadTypes: pts})
	video, audio, pcmu := udpFrom(t, "127.0.0.1:0"), udpFrom(t, "127.0.0.1:0"), udpFrom(t, "127.0.0.1:0")
	dst := net.UDPAddrFromAddrPort(e.RTP())
	for i := range 10 {
		video.WriteToUDP(rtpPacket(96, uint16(i), 1, 1000), dst)
		audio.WriteToUDP(rtpPacket(97, uint16(i), 2, 80), dst)
		pcmu.WriteToUDP(rtpPacket(0, uint16(i), 3, 160), dst)
	}
	vid := "rtp:" + video.LocalAddr().String() + "/video"
	aud := "rtp:" + audio.LocalAddr().String() + "/audio"
	g711 := "rtp:" + pcmu.LocalAddr().String() + "/audio"
	testutil.WaitFor(t, 5*time.Second, "30 packets on 3 tracks", func() bool {
		return tp.count(vid) == 10 && tp.count(aud) == 10 && tp.count(g711) == 10
	})
	tp.mu.Lock()
	if got := tp.info[vid]; got.Codec != "video/VP8" || got.ClockRate != 90000 {
		t.Errorf("video track info %+v", got)
	}
	if got := tp.info[aud]; got.Codec != "audio/opus" || got.ClockRate != 48000 || got.Channels != 2 {
		t.Errorf("audio track info %+v", got)
	}
	if got := tp.info[g711]; got.Codec != "audio/PCMU" || got.ClockRate != 8000 {
		t.Errorf("PCMU track info %+v", got)
	}
	if want := rtpPacket(96, 3, 1, 1000); string(tp.rtp[vid][3]) != string(want) {
		t.Error("a video packet changed on the way")
	}
	tp.mu.Unlock()

	// RTCP from the video sender's port + 1, and muxed on the RTP port.
	rtcp := udpFrom(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(video.LocalAddr().(*net.UDPAddr).Port+1)).String())
	rtcp.WriteToUDP(senderReport(1), net.UDPAddrFromAddrPort(e.RTCP()))
	audio.WriteToUDP(senderReport(2), dst)
	testutil.WaitFor(t, 5*time.Second, "2 sender reports", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.rtcp) == 2
	})
	st := e.Stats()
	if st.Packets != 32 || st.RTCP != 2 || st.Streams != 3 || len(st.Dropped) != 0 || st.Last.IsZero() {
		t.Errorf("stats %+v", st)
	}
}

// TestEarlyRTCPGoesFirst: a sender report that comes before its stream's
// first RTP packet (ffmpeg's first does) is held and passed on first.
func TestEarlyRTCPGoesFirst(t *testing.T) {
	e, tp := open(t, Config{Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	a := udpFrom(t, "127.0.0.1:0")
	port := a.LocalAddr().(*net.UDPAddr).Port
	ar := udpFrom(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port+1)).String())
	ar.WriteToUDP(senderReport(5), net.UDPAddrFromAddrPort(e.RTCP()))
	testutil.WaitFor(t, 5*time.Second, "the report held", func() bool { return e.Stats().Held == 1 })
	a.WriteToUDP(rtpPacket(0, 1, 5, 160), net.UDPAddrFromAddrPort(e.RTP()))
	testutil.WaitFor(t, 5*time.Second, "report and packet passed on", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.rtcp) == 1 && len(tp.rtp["rtp:"+a.LocalAddr().String()+"/audio"]) == 1
	})
	if st := e.Stats(); st.Held != 0 || st.Packets != 2 || st.RTCP != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestDropsWhatItCannotTake(t *testing.T) {
	e, tp := open(t, Config{Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxStreams: 1})
	dst := net.UDPAddrFromAddrPort(e.RTP())
	stranger := udpFrom(t, "127.0.0.2:0")
	a, b := udpFrom(t, "127.0.0.1:0"), udpFrom(t, "127.0.0.1:0")
	stranger.WriteToUDP(rtpPacket(0, 1, 9, 160), dst) // not an allowed source
	a.WriteToUDP(rtpPacket(96, 1, 1, 160), dst)       // a dynamic type nobody named
	a.WriteToUDP([]byte{0x80, 0, 1}, dst)             // truncated
	a.WriteToUDP(rtpPacket(0, 2, 1, 160)[:12], dst)   // fine: an empty payload
	a.WriteToUDP(append([]byte{0x40}, make([]byte, 20)...), dst)
	b.WriteToUDP(rtpPacket(8, 1, 2, 160), dst) // past MaxStreams
	testutil.WaitFor(t, 5*time.Second, "the allowed packet", func() bool { return e.Stats().Streams == 1 })
	a.WriteToUDP(senderReport(77), net.UDPAddrFromAddrPort(e.RTCP())) // a stream past the cap
	want := map[string]uint64{"source": 1, "unknown_pt": 1, "truncated": 1, "bad_version": 1, "streams": 1, "rtcp_unknown": 1}
	testutil.WaitFor(t, 5*time.Second, "every datagram counted", func() bool {
		st := e.Stats()
		n := uint64(0)
		for _, v := range st.Dropped {
			n += v
		}
		return n == 6 && st.Packets == 1
	})
	st := e.Stats()
	for r, n := range want {
		if st.Dropped[r] != n {
			t.Errorf("dropped %s = %d, want %d (all: %v)", r, st.Dropped[r], n, st.Dropped)
		}
	}
	if n := tp.count("rtp:" + a.LocalAddr().String() + "/audio"); n != 1 {
		t.Errorf("%d packets of the allowed stream reached the room, want 1", n)
	}
}

func TestParseCodec(t *testing.T) {
	for _, tc := range []struct {
		in, codec string
		rate      uint32
		ch        uint16
		kind      media.Kind
	}{
		{"VP8/90000", "video/VP8", 90000, 0, media.Video},
		{"vp8/90000", "video/VP8", 90000, 0, media.Video},
		{"opus/48000/2", "audio/opus", 48000, 2, media.Audio},
		{"H264/90000", "video/H264", 90000, 0, media.Video},
		{"video/FOO/90000", "video/FOO", 90000, 0, media.Video},
		{"audio/speex/16000", "audio/speex", 16000, 1, media.Audio},
	} {
		c, err := ParseCodec(tc.in)
		if err != nil || c.Info.Codec != tc.codec || c.Info.ClockRate != tc.rate || c.Info.Channels != tc.ch || c.Kind != tc.kind {
			t.Errorf("ParseCodec(%q) = %+v, %v", tc.in, c, err)
		}
	}
	for _, bad := range []string{"", "FOO/90000", "VP8", "VP8/abc", "opus/48000/99", "VP8/90000/1/2", "video/"} {
		if _, err := ParseCodec(bad); err == nil {
			t.Errorf("ParseCodec(%q) took it", bad)
		}
	}
	if _, err := ParsePayloadTypes(map[string]string{"200": "VP8/90000"}); err == nil {
		t.Error("payload type 200 taken")
	}
	if _, err := ParsePayloadTypes(map[string]string{"72": "VP8/90000"}); err == nil {
		t.Error("payload type 72 (RTCP's range) taken")
	}
}

func FuzzParseCodec(f *testing.F) {
	for _, s := range []string{"VP8/90000", "opus/48000/2", "video/X/1000", "//", "audio/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCodec(s)
		if err == nil && (c.Info.ClockRate == 0 || c.Info.Codec == "") {
			t.Fatalf("ParseCodec(%q) = %+v without an error", s, c)
		}
	})
}

// FuzzHandle feeds any datagram to an endpoint: it never panics, and
// every datagram is either accepted or dropped with a reason.
func FuzzHandle(f *testing.F) {
	f.Add(rtpPacket(0, 1, 1, 10), false)
	f.Add(senderReport(1), true)
	f.Add([]byte{0x80, 200, 0, 0}, false)
	f.Add([]byte{}, false)
	room := broker.NewRoom("fuzz")
	e := &Endpoint{cfg: Config{Room: room, MaxStreams: 4, Metrics: NewMetrics(),
		Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		sources: map[sourceKey]*broker.Track{}, ssrcKind: map[uint32]media.Kind{}}
	for i, r := range dropReasons {
		e.dropCounts[i] = e.cfg.Metrics.dropped.WithLabelValues(r)
	}
	from := netip.MustParseAddrPort("127.0.0.1:5000")
	f.Fuzz(func(t *testing.T, b []byte, rtcpPort bool) {
		if len(b) > media.BufSize-1 {
			return
		}
		before := e.Stats()
		p := media.NewPacket()
		p.SetLen(copy(p.Buffer(), b))
		e.handle(p, from, rtcpPort)
		after := e.Stats()
		var d0, d1 uint64
		for _, v := range before.Dropped {
			d0 += v
		}
		for _, v := range after.Dropped {
			d1 += v
		}
		if after.Packets+d1+uint64(after.Held) != before.Packets+d0+uint64(before.Held)+1 {
			t.Fatalf("datagram %x neither accepted nor dropped once", b)
		}
	})
}
