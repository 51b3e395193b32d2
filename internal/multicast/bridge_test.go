package multicast

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/udpmux"
)

func TestOpenValidates(t *testing.T) {
	g := netip.MustParseAddrPort("239.1.2.3:5004")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no id", Config{Group: g}, "empty ID"},
		{"unicast group", Config{ID: "m", Group: netip.MustParseAddrPort("10.0.0.1:5004")}, "not an IPv4 multicast"},
		{"ipv6 group", Config{ID: "m", Group: netip.MustParseAddrPort("[ff0e::1]:5004")}, "not an IPv4 multicast"},
		{"no group", Config{ID: "m"}, "not an IPv4 multicast"},
		{"port 0", Config{ID: "m", Group: netip.MustParseAddrPort("239.1.2.3:0")}, "port"},
		{"port 65535", Config{ID: "m", Group: netip.MustParseAddrPort("239.1.2.3:65535")}, "port"},
		{"ttl -1", Config{ID: "m", Group: g, TTL: -1}, "TTL"},
		{"ttl 256", Config{ID: "m", Group: g, TTL: 256}, "TTL"},
		{"direction", Config{ID: "m", Group: g, Direction: "inactive"}, "direction"},
		{"interface", Config{ID: "m", Group: g, Interface: "no-such-if0"}, "no-such-if0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := broker.NewRoom("s")
			b, err := Open(tc.cfg, room)
			if err == nil {
				b.Close()
				t.Fatal("Open accepted the config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if room.Members() != 0 {
				t.Error("failed Open joined the room")
			}
		})
	}

	cfg := Config{ID: "m", Group: netip.MustParseAddrPort("[::ffff:239.1.2.3]:5004")}
	if err := validate(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Group != g || cfg.TTL != 1 || cfg.Direction != media.SendRecv || cfg.Queue != DefaultQueue || cfg.Logger == nil {
		t.Errorf("defaults not filled in: %+v", cfg)
	}
}

func TestSSRCSetBounded(t *testing.T) {
	var s ssrcSet
	if s.has(1) {
		t.Fatal("empty set has an SSRC")
	}
	const live = 0xfeedface
	for i := range uint32(10 * ssrcGen) {
		s.add(i)
		s.add(live) // still being sent: must never be forgotten
		if !s.has(live) || !s.has(i) {
			t.Fatalf("lost an SSRC at %d", i)
		}
		if n := s.len(); n > 2*ssrcGen {
			t.Fatalf("set holds %d SSRCs, bound is %d", n, 2*ssrcGen)
		}
	}
	if s.has(0) {
		t.Error("stale SSRC never aged out")
	}
}

type discard struct{}

func (discard) Deliver(p *media.Packet, _ *broker.Track) { p.Release() }

// TestReceivePathAllocs checks that handling a datagram from the group,
// including the loop check and the fan-out into the room, allocates nothing.
func TestReceivePathAllocs(t *testing.T) {
	room := broker.NewRoom("s")
	if _, err := room.Join(broker.Member{ID: "sub", Kind: media.Audio, Receives: true, Sink: discard{}, RTCPSink: discard{}}); err != nil {
		t.Fatal(err)
	}
	b := &Bridge{cfg: Config{ID: "mc", Kind: media.Audio}, room: room,
		dest: udpmux.NewDest(netip.MustParseAddrPort("239.1.2.3:5004"), 1), rtcpDest: udpmux.NewDest(netip.MustParseAddrPort("239.1.2.3:5005"), 1)}
	tr, err := room.Join(broker.Member{ID: "mc", Kind: media.Audio, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	b.track = tr
	for i := range uint32(100) {
		b.sent.add(0x1000 + i)
	}
	rtp := rtpPacket(0, false, 1, 160, 0xabcdef01, []uint32{1}, []byte{0x85}, make([]byte, 160))
	echo := rtpPacket(0, false, 1, 160, 0x1000+7, nil, nil, make([]byte, 160))
	rtcp := rtcpRR(0xabcdef01, "x@y")
	for _, tc := range []struct {
		name   string
		b      []byte
		handle func(*media.Packet)
	}{{"rtp", rtp, b.handleRTP}, {"rtp loop", echo, b.handleRTP}, {"rtcp", rtcp, b.handleRTCP}} {
		p := media.NewPacket() // held throughout, so the pool plays no part
		p.SetLen(copy(p.Buffer(), tc.b))
		if n := testing.AllocsPerRun(1000, func() {
			p.Retain(1)
			tc.handle(p)
		}); n != 0 {
			t.Errorf("%s: %v allocations per packet", tc.name, n)
		}
		p.Release()
	}
	st := b.Stats()
	if st.PacketsIn == 0 || st.RTCPIn == 0 || st.Dropped[DropLoop] == 0 {
		t.Errorf("paths not taken: %+v", st)
	}
}
