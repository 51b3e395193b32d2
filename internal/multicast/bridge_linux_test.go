//go:build linux

package multicast

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

const (
	vicSSRC     = 0x11111111
	speakerSSRC = 0x22222222
)

// randomGroup picks an administratively scoped group (239.255.0.0/16) and an
// even port.
func randomGroup() netip.AddrPort {
	a := netip.AddrFrom4([4]byte{239, 255, byte(1 + rand.IntN(254)), byte(1 + rand.IntN(254))})
	return netip.AddrPortFrom(a, uint16(20000+2*rand.IntN(20000)))
}

type datagram struct {
	b    []byte
	from netip.AddrPort
}

// extSock is an external multicast tool on the same host, as vic or rat
// run: one socket bound to the group address and port with SO_REUSEADDR,
// joined to the group on lo, that sends to the group from that port and
// hears everything sent there, its own packets included.
type extSock struct {
	conn  *net.UDPConn
	group netip.AddrPort
	done  chan struct{}

	mu  sync.Mutex
	got []datagram
}

func newExtSock(t *testing.T, group netip.AddrPort) *extSock {
	t.Helper()
	// Bound to the group address itself, as rat does; net.ListenPacket
	// would bind the wildcard address instead, and a wildcard socket on the
	// port would take the unicast stray TestBridgeSendRecv sends.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "ext")
	defer f.Close()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: group.Addr().As4(), Port: int(group.Port())}); err != nil {
		t.Fatalf("external socket: bind %s: %v", group, err)
	}
	pc, err := net.FilePacketConn(f)
	if err != nil {
		t.Fatal(err)
	}
	conn := pc.(*net.UDPConn)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	p := ipv4.NewPacketConn(conn)
	if err := p.JoinGroup(lo, &net.UDPAddr{IP: group.Addr().AsSlice()}); err != nil {
		t.Fatalf("external socket: join %s on lo: %v", group.Addr(), err)
	}
	if err := p.SetMulticastInterface(lo); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMulticastLoopback(true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMulticastTTL(1); err != nil {
		t.Fatal(err)
	}
	s := &extSock{conn: conn, group: group, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, datagram{bytes.Clone(buf[:n]), from})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-s.done })
	return s
}

func (s *extSock) send(t *testing.T, b []byte) {
	t.Helper()
	if _, err := s.conn.WriteToUDPAddrPort(b, s.group); err != nil {
		t.Fatalf("send to group: %v", err)
	}
}

// received returns the datagrams heard on the group that pass keep.
func (s *extSock) received(keep func(datagram) bool) []datagram {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []datagram
	for _, d := range s.got {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}

func payloads(ds []datagram) [][]byte {
	out := make([][]byte, len(ds))
	for i, d := range ds {
		out[i] = d.b
	}
	return out
}

func withSSRC(ssrc uint32, rtcp bool) func(datagram) bool {
	return func(d datagram) bool {
		if rtcp {
			return len(d.b) >= 8 && d.b[4] == byte(ssrc>>24) && d.b[5] == byte(ssrc>>16) && d.b[6] == byte(ssrc>>8) && d.b[7] == byte(ssrc)
		}
		return len(d.b) >= 12 && ssrcOf(d.b) == ssrc
	}
}

// vicPackets builds n RTP packets as vic would send them, with the shapes
// Classify must accept: plain, with CSRCs, with a header extension.
func vicPackets(ssrc uint32, first uint16, n int) [][]byte {
	var out [][]byte
	for i := range n {
		seq := first + uint16(i)
		payload := bytes.Repeat([]byte{byte(i), 0xa5}, 80+i)
		var csrc []uint32
		var ext []byte
		switch i % 3 {
		case 1:
			csrc = []uint32{0xc0ffee00 + uint32(i), 0xdecaf000}
		case 2:
			ext = []byte{0x80 | byte(i)} // an audio level (RFC 6464)
		}
		out = append(out, rtpPacket(0, i == 0, seq, 160*uint32(seq), ssrc, csrc, ext, payload))
	}
	return out
}

type testRoom struct {
	room     *broker.Room
	listener *recorder // receives RTP and RTCP, sends nothing
	speaker  *recorder // sends on track, receives RTP
	track    *broker.Track
}

func newTestRoom(t *testing.T) *testRoom {
	t.Helper()
	r := &testRoom{room: broker.NewRoom("session"), listener: &recorder{}, speaker: &recorder{}}
	if _, err := r.room.Join(broker.Member{ID: "listener", Kind: media.Audio, Receives: true, Sink: r.listener, RTCPSink: r.listener}); err != nil {
		t.Fatal(err)
	}
	tr, err := r.room.Join(broker.Member{ID: "speaker", Kind: media.Audio, Sends: true, Receives: true, Sink: r.speaker})
	if err != nil {
		t.Fatal(err)
	}
	r.track = tr
	return r
}

func (r *testRoom) publish(b []byte) {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), b))
	r.track.Publish(p)
}

func openBridge(t *testing.T, cfg Config, room *broker.Room) *Bridge {
	t.Helper()
	b, err := Open(cfg, room)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestBridgeSendRecv(t *testing.T) {
	if !inNetns(t) {
		return
	}
	group := randomGroup()
	rtcpGroup := netip.AddrPortFrom(group.Addr(), group.Port()+1)
	tr := newTestRoom(t)
	b := openBridge(t, Config{ID: "mc", Kind: media.Audio, Group: group, Interface: "lo", Direction: media.SendRecv, Queue: 256}, tr.room)
	if b.Track() == nil || b.Track().Publisher() != "mc" {
		t.Fatalf("bridge track %v", b.Track())
	}
	src := b.SourceAddr()
	if src.Addr() != netip.MustParseAddr("127.0.0.1") || src.Port() == 0 {
		t.Fatalf("send socket %s, want 127.0.0.1:<port> (lo's address)", src)
	}
	if len(b.recv) != 2 || b.recv[0].conn.LocalAddr().String() != group.String() || b.recv[1].conn.LocalAddr().String() != rtcpGroup.String() {
		t.Fatalf("receive sockets not bound to the group's addresses %s and %s", group, rtcpGroup)
	}
	vic := newExtSock(t, group)
	vicRTCP := newExtSock(t, rtcpGroup)

	// group -> session: vic's packets reach every other member byte for byte.
	fromVic := vicPackets(vicSSRC, 1000, 30)
	for _, p := range fromVic {
		vic.send(t, p)
	}
	testutil.WaitFor(t, 5*time.Second, "vic's packets in the room", func() bool {
		return len(tr.listener.snapshot("mc")) >= len(fromVic) && len(tr.speaker.snapshot("mc")) >= len(fromVic)
	})
	equalPackets(t, "listener from group", tr.listener.snapshot("mc"), fromVic)
	equalPackets(t, "speaker from group", tr.speaker.snapshot("mc"), fromVic)

	// session -> group: the speaker's packets reach vic byte for byte, from
	// the bridge's send socket.
	fromSpeaker := vicPackets(speakerSSRC, 50000, 30)
	for _, p := range fromSpeaker {
		tr.publish(p)
	}
	testutil.WaitFor(t, 5*time.Second, "speaker's packets on the group", func() bool {
		return len(vic.received(withSSRC(speakerSSRC, false))) >= len(fromSpeaker)
	})
	got := vic.received(withSSRC(speakerSSRC, false))
	equalPackets(t, "vic from session", payloads(got), fromSpeaker)
	for _, d := range got {
		if d.from != src {
			t.Fatalf("session packet came from %s, want the bridge's %s", d.from, src)
		}
	}
	// Our own multicast loops back to the bridge, which drops it.
	testutil.WaitFor(t, 5*time.Second, "own packets dropped as loop", func() bool {
		return b.Stats().Dropped[DropLoop] >= uint64(len(fromSpeaker))
	})

	// RTCP both ways on port+1.
	rr := rtcpRR(vicSSRC, "vic@host")
	vicRTCP.send(t, rr)
	testutil.WaitFor(t, 5*time.Second, "vic's RTCP in the room", func() bool { return len(tr.listener.snapshot("")) >= 1 })
	equalPackets(t, "listener RTCP", tr.listener.snapshot(""), [][]byte{rr})
	srr := rtcpRR(speakerSSRC, "speaker@convene")
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), srr))
	tr.room.PublishRTCP("speaker", media.Audio, p)
	testutil.WaitFor(t, 5*time.Second, "speaker's RTCP on the group", func() bool {
		return len(vicRTCP.received(withSSRC(speakerSSRC, true))) >= 1
	})
	equalPackets(t, "vic RTCP from session", payloads(vicRTCP.received(withSSRC(speakerSSRC, true))), [][]byte{srr})
	testutil.WaitFor(t, 5*time.Second, "own RTCP dropped as loop", func() bool {
		return b.Stats().Dropped[DropLoop] >= uint64(len(fromSpeaker))+1
	})

	// A reflector on the group repeats one of the session's RTP packets and
	// its RTCP from another address: the bridge knows the SSRCs and drops
	// them.
	refl, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer refl.Close()
	lo, _ := net.InterfaceByName("lo")
	if err := ipv4.NewPacketConn(refl).SetMulticastInterface(lo); err != nil {
		t.Fatal(err)
	}
	loops := b.Stats().Dropped[DropLoop]
	if _, err := refl.WriteToUDPAddrPort(fromSpeaker[3], group); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "reflected packet dropped as loop", func() bool { return b.Stats().Dropped[DropLoop] == loops+1 })
	if _, err := refl.WriteToUDPAddrPort(srr, rtcpGroup); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "reflected RTCP dropped as loop", func() bool { return b.Stats().Dropped[DropLoop] == loops+2 })

	// The source address check alone: a datagram from the bridge's send
	// socket whose SSRC the bridge has not recorded is still its own.
	unknown := rtpPacket(0, false, 1, 1, 0x44444444, nil, nil, []byte("own, unrecorded"))
	own := media.NewPacket()
	own.SetLen(copy(own.Buffer(), unknown))
	own.Kind = media.Audio
	b.send.Send(own, b.dest)
	testutil.WaitFor(t, 5*time.Second, "unrecorded own packet on the group", func() bool { return len(vic.received(withSSRC(0x44444444, false))) == 1 })
	testutil.WaitFor(t, 5*time.Second, "unrecorded own packet dropped as loop", func() bool { return b.Stats().Dropped[DropLoop] == loops+3 })

	// Datagrams that are not RTP are dropped and counted; unicast to the
	// group's port is not the bridge's.
	vic.send(t, []byte{0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a}) // version 0
	vic.send(t, []byte{0x80, 0x00, 0x00, 0x01, 0x00})                                           // truncated
	uni, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uni.Close()
	stray := rtpPacket(0, false, 1, 1, 0x33333333, nil, nil, []byte("unicast"))
	if _, err := uni.WriteToUDPAddrPort(stray, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), group.Port())); err != nil {
		t.Fatal(err)
	}
	sentinel := vicPackets(vicSSRC, 1030, 1)[0]
	vic.send(t, sentinel)
	fromVic = append(fromVic, sentinel)
	testutil.WaitFor(t, 5*time.Second, "sentinel", func() bool { return len(tr.listener.snapshot("mc")) >= len(fromVic) })
	st := b.Stats()
	if st.Dropped[media.DropBadVersion] != 1 || st.Dropped[media.DropTruncated] != 1 {
		t.Errorf("dropped %v, want one bad_version and one truncated", st.Dropped)
	}

	// The bridge never republished its own sends: once every one of them
	// has come back from the group and been dropped as a loop (RTP and
	// RTCP, each socket read in order, and vic's sentinel above after all
	// of them on the RTP socket), the room got exactly what vic sent.
	testutil.WaitFor(t, 5*time.Second, "every own packet back from the group as a loop", func() bool {
		return b.Stats().Dropped[DropLoop] >= uint64(len(fromSpeaker))+4
	})
	equalPackets(t, "listener from group, final", tr.listener.snapshot("mc"), fromVic)
	equalPackets(t, "speaker from group, final", tr.speaker.snapshot("mc"), fromVic)
	st = b.Stats()
	var inBytes uint64
	for _, p := range fromVic {
		inBytes += uint64(len(p))
	}
	if st.PacketsIn != uint64(len(fromVic)) || st.BytesIn != inBytes {
		t.Errorf("in %d packets %d bytes, want %d %d", st.PacketsIn, st.BytesIn, len(fromVic), inBytes)
	}
	if n, _ := b.Track().Stats(); n != uint64(len(fromVic)) {
		t.Errorf("bridge track published %d packets, want %d", n, len(fromVic))
	}
	if st.RTCPIn != 1 {
		t.Errorf("RTCP in %d, want 1", st.RTCPIn)
	}
	if st.Out.Packets != uint64(len(fromSpeaker))+1 || st.RTCPOut.Packets != 1 || st.Out.Drops != 0 {
		t.Errorf("out %+v rtcp out %+v, want %d and 1 sent", st.Out, st.RTCPOut, len(fromSpeaker)+1)
	}
	if st.Dropped[DropLoop] != uint64(len(fromSpeaker))+4 {
		t.Errorf("loop drops %d, want %d (own RTP, own RTCP, reflected RTP and RTCP, unrecorded own)", st.Dropped[DropLoop], len(fromSpeaker)+4)
	}
	if st.Dropped[DropOversize] != 0 {
		t.Errorf("oversize drops %d", st.Dropped[DropOversize])
	}
	if got := tr.listener.snapshot("speaker"); len(got) != len(fromSpeaker) {
		t.Errorf("listener got %d of the speaker's packets, want %d", len(got), len(fromSpeaker))
	}

	// Close is idempotent, leaves the room and stops bridging.
	b.Close()
	b.Close()
	if n := tr.room.Members(); n != 2 {
		t.Errorf("room has %d members after Close, want 2", n)
	}
	if n := tr.track.Subscribers(); n != 1 {
		t.Errorf("speaker track has %d subscribers after Close, want 1", n)
	}
	// Close waited for the bridge's readers, so nothing can be published
	// now; vic hearing its own packet (the sentinel) shows the group still
	// carried it.
	late := vicPackets(vicSSRC, 2000, 1)[0]
	heard := len(vic.received(withSSRC(vicSSRC, false)))
	vic.send(t, late)
	testutil.WaitFor(t, 5*time.Second, "vic's late packet on the group", func() bool { return len(vic.received(withSSRC(vicSSRC, false))) > heard })
	if n := len(tr.listener.snapshot("mc")); n != len(fromVic) {
		t.Errorf("room got %d packets from the group after Close, want %d", n, len(fromVic))
	}
}

func TestBridgeDirections(t *testing.T) {
	if !inNetns(t) {
		return
	}
	t.Run("recvonly", func(t *testing.T) {
		group := randomGroup()
		tr := newTestRoom(t)
		b := openBridge(t, Config{ID: "mc", Kind: media.Audio, Group: group, Interface: "lo", Direction: media.RecvOnly}, tr.room)
		if b.Track() != nil {
			t.Fatal("recvonly bridge has a track")
		}
		vic := newExtSock(t, group)
		vicRTCP := newExtSock(t, netip.AddrPortFrom(group.Addr(), group.Port()+1))

		// session -> group works.
		fromSpeaker := vicPackets(speakerSSRC, 7, 5)
		for _, p := range fromSpeaker {
			tr.publish(p)
		}
		testutil.WaitFor(t, 5*time.Second, "speaker's packets on the group", func() bool {
			return len(vic.received(withSSRC(speakerSSRC, false))) >= len(fromSpeaker)
		})
		equalPackets(t, "vic from session", payloads(vic.received(withSSRC(speakerSSRC, false))), fromSpeaker)

		// group -> session does not; the group's RTCP still comes in.
		for _, p := range vicPackets(vicSSRC, 1, 10) {
			vic.send(t, p)
		}
		rr := rtcpRR(vicSSRC, "vic@host")
		vicRTCP.send(t, rr)
		testutil.WaitFor(t, 5*time.Second, "vic's RTCP in the room", func() bool { return len(tr.listener.snapshot("")) >= 1 })
		// Sentinel: vic hears its own RTP, so the group carried it while the
		// bridge was joined.
		testutil.WaitFor(t, 5*time.Second, "vic's own RTP on the group", func() bool { return len(vic.received(withSSRC(vicSSRC, false))) >= 10 })
		if n := len(tr.listener.snapshot("mc")) + len(tr.speaker.snapshot("mc")); n != 0 {
			t.Errorf("recvonly bridge published %d packets from the group", n)
		}
		equalPackets(t, "listener RTCP", tr.listener.snapshot(""), [][]byte{rr})
		st := b.Stats()
		if st.PacketsIn != 0 || st.Out.Packets != uint64(len(fromSpeaker)) {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("sendonly", func(t *testing.T) {
		group := randomGroup()
		tr := newTestRoom(t)
		b := openBridge(t, Config{ID: "mc", Kind: media.Audio, Group: group, Interface: "lo", Direction: media.SendOnly}, tr.room)
		if b.Track() == nil {
			t.Fatal("sendonly bridge has no track")
		}
		if b.SourceAddr().IsValid() {
			t.Errorf("sendonly bridge has a send socket %s", b.SourceAddr())
		}
		vic := newExtSock(t, group)

		// group -> session works.
		fromVic := vicPackets(vicSSRC, 1, 10)
		for _, p := range fromVic {
			vic.send(t, p)
		}
		testutil.WaitFor(t, 5*time.Second, "vic's packets in the room", func() bool { return len(tr.listener.snapshot("mc")) >= len(fromVic) })
		equalPackets(t, "listener from group", tr.listener.snapshot("mc"), fromVic)

		// session -> group does not: the bridge does not subscribe.
		if n := tr.track.Subscribers(); n != 1 {
			t.Errorf("speaker track has %d subscribers, want 1 (the listener)", n)
		}
		for _, p := range vicPackets(speakerSSRC, 1, 5) {
			tr.publish(p)
		}
		sentinel := vicPackets(vicSSRC, 11, 1)[0]
		vic.send(t, sentinel) // vic hears itself: the group is flowing
		testutil.WaitFor(t, 5*time.Second, "vic's own sentinel", func() bool { return len(vic.received(withSSRC(vicSSRC, false))) >= len(fromVic)+1 })
		// The bridge has no send socket and no subscription (both checked
		// above), so the publishes above had nowhere to go; the sentinel
		// shows the group was flowing while they were made.
		if n := len(vic.received(withSSRC(speakerSSRC, false))); n != 0 {
			t.Errorf("sendonly bridge sent %d session packets to the group", n)
		}
		if st := b.Stats(); st.Out.Packets != 0 || st.PacketsIn != uint64(len(fromVic))+1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("closed room", func(t *testing.T) {
		room := broker.NewRoom("closed")
		room.Close()
		_, err := Open(Config{ID: "mc", Group: randomGroup(), Interface: "lo"}, room)
		if !errors.Is(err, broker.ErrRoomClosed) {
			t.Fatalf("Open on a closed room: %v", err)
		}
	})
}

// TestTwoBridgesOneGroup joins two rooms to the same group, as two Convene
// nodes of one session would: what one room sends reaches the other, and
// neither bridge sends it back.
func TestTwoBridgesOneGroup(t *testing.T) {
	if !inNetns(t) {
		return
	}
	group := randomGroup()
	ra, rb := newTestRoom(t), newTestRoom(t)
	ba := openBridge(t, Config{ID: "mc-a", Group: group, Interface: "lo"}, ra.room)
	bb := openBridge(t, Config{ID: "mc-b", Group: group, Interface: "lo"}, rb.room)

	fromA := vicPackets(0xaaaa0001, 1, 20)
	for _, p := range fromA {
		ra.publish(p)
	}
	testutil.WaitFor(t, 5*time.Second, "room a's packets in room b", func() bool { return len(rb.listener.snapshot("mc-b")) >= len(fromA) })
	// Sentinel: room b sends one packet after all of a's came through; a's
	// bridge reads its group socket in order, so once a has it, a's own
	// packets that came back before it have been dropped, not published.
	sentinel := vicPackets(0xbbbb0001, 1, 1)[0]
	rb.publish(sentinel)
	testutil.WaitFor(t, 5*time.Second, "room b's sentinel in room a", func() bool { return len(ra.listener.snapshot("mc-a")) >= 1 })
	equalPackets(t, "room a from group", ra.listener.snapshot("mc-a"), [][]byte{sentinel})
	equalPackets(t, "room a's speaker from group", ra.speaker.snapshot("mc-a"), [][]byte{sentinel})
	testutil.WaitFor(t, 5*time.Second, "room b's sentinel back as a loop", func() bool { return bb.Stats().Dropped[DropLoop] >= 1 })
	equalPackets(t, "room b from group", rb.listener.snapshot("mc-b"), fromA)
	if sa, sb := ba.Stats(), bb.Stats(); sa.Out.Packets != uint64(len(fromA)) || sb.Out.Packets != 1 || sa.PacketsIn != 1 {
		t.Errorf("a %+v b %+v", sa, sb)
	}
}
