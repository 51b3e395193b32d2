package rtplink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
	"github.com/convene/convene/internal/udpmux"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// arrival bounds how long a packet that must arrive may take; quiet is how
// long we listen for packets that must not arrive. Neither is a timing
// assertion: a slow machine only makes the quiet check weaker.
const (
	arrival = 5 * time.Second
	quiet   = 300 * time.Millisecond
)

// env is a node's two shared sockets and one room.
type env struct {
	socks Sockets
	room  *broker.Room
}

func newEnv(t *testing.T) *env {
	t.Helper()
	listen := func() *udpmux.Socket {
		s, err := udpmux.Listen("127.0.0.1:0", udpmux.Options{Batch: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return &env{socks: Sockets{RTP: listen(), RTCP: listen()}, room: broker.New().Open("session")}
}

// endpoint is a remote RTP tool: an RTP socket and, unless it muxes, an RTCP
// socket.
type endpoint struct {
	name      string
	rtp, rtcp *net.UDPConn
}

func listenUDP(port int) (*net.UDPConn, error) {
	return net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
}

func closeOnCleanup(t *testing.T, c *net.UDPConn) *net.UDPConn {
	t.Helper()
	c.SetReadBuffer(1 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// newPairEndpoint binds RTP on an even-or-odd free port p and RTCP on p+1, as
// RTP tools do, retrying until two consecutive ports are free.
func newPairEndpoint(t *testing.T, name string) *endpoint {
	t.Helper()
	for range 1000 {
		a, err := listenUDP(0)
		if err != nil {
			t.Fatal(err)
		}
		p := a.LocalAddr().(*net.UDPAddr).Port
		if p == 65535 {
			a.Close()
			continue
		}
		b, err := listenUDP(p + 1)
		if err != nil {
			a.Close()
			continue
		}
		return &endpoint{name: name, rtp: closeOnCleanup(t, a), rtcp: closeOnCleanup(t, b)}
	}
	t.Fatal("no two consecutive free UDP ports")
	return nil
}

// newEndpoint binds unrelated RTP and RTCP ports (for an explicit
// RemoteRTCP), or only RTP when mux is set.
func newEndpoint(t *testing.T, name string, mux bool) *endpoint {
	t.Helper()
	e := &endpoint{name: name}
	for _, c := range []**net.UDPConn{&e.rtp, &e.rtcp} {
		if mux && c == &e.rtcp {
			break
		}
		conn, err := listenUDP(0)
		if err != nil {
			t.Fatal(err)
		}
		*c = closeOnCleanup(t, conn)
	}
	return e
}

func addrOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

func (e *endpoint) conns() []*net.UDPConn {
	if e.rtcp == nil {
		return []*net.UDPConn{e.rtp}
	}
	return []*net.UDPConn{e.rtp, e.rtcp}
}

// open attaches e to the room. Unless cfg says otherwise the link is a
// sendrecv audio link whose RTCP address is derived from Remote.
func (v *env) open(t *testing.T, e *endpoint, cfg Config) *Link {
	t.Helper()
	l, err := v.tryOpen(e, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", e.name, err)
	}
	t.Cleanup(l.Close)
	return l
}

func (v *env) tryOpen(e *endpoint, cfg Config) (*Link, error) {
	if cfg.ID == "" {
		cfg.ID = e.name
	}
	if cfg.Direction == "" {
		cfg.Direction = media.SendRecv
	}
	if !cfg.Remote.IsValid() {
		cfg.Remote = addrOf(e.rtp)
	}
	if cfg.Queue == 0 {
		cfg.Queue = 256
	}
	return Open(cfg, v.socks, v.room)
}

func send(t *testing.T, from *net.UDPConn, to *udpmux.Socket, b []byte) {
	t.Helper()
	if _, err := from.WriteToUDPAddrPort(b, to.LocalAddr()); err != nil {
		t.Fatal(err)
	}
}

// recv reads one datagram, failing if none arrives in time or if it does
// not come from the socket src.
func recv(t *testing.T, c *net.UDPConn, src *udpmux.Socket, what string) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(arrival))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port()); from != src.LocalAddr() {
		t.Fatalf("%s: datagram from %v, want %v", what, from, src.LocalAddr())
	}
	return buf[:n]
}

// expect reads datagrams from c and checks they are want, in order, sent by
// the socket src.
func expect(t *testing.T, c *net.UDPConn, src *udpmux.Socket, what string, want ...[]byte) {
	t.Helper()
	for i, w := range want {
		if got := recv(t, c, src, fmt.Sprintf("%s: packet %d", what, i)); !bytes.Equal(got, w) {
			t.Fatalf("%s: packet %d is\n% x\nwant\n% x", what, i, got, w)
		}
	}
}

// expectQuiet checks that none of the sockets gets anything for a while.
func expectQuiet(t *testing.T, eps ...*endpoint) {
	t.Helper()
	deadline := time.Now().Add(quiet)
	buf := make([]byte, 4096)
	for _, e := range eps {
		for i, c := range e.conns() {
			c.SetReadDeadline(deadline)
			n, err := c.Read(buf)
			if err == nil {
				t.Fatalf("%s (socket %d) got a stray datagram: % x", e.name, i, buf[:n])
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%s: %v", e.name, err)
			}
		}
	}
}

// waitFor polls f until it returns "" (no mismatch) and fails with its last
// answer after the arrival deadline.
// counts is what a test expects of a link's counters.
type counts struct {
	in, inBytes             int // RTP accepted
	rtcpIn                  int
	out, outBytes           int // RTP sent to the endpoint
	rtcpOut, rtcpOutBytes   int
	truncated, badVer, dirn int
}

func (c counts) stats() Stats {
	return Stats{
		PacketsIn: uint64(c.in), BytesIn: uint64(c.inBytes), RTCPIn: uint64(c.rtcpIn),
		Out:     udpmux.DestStats{Packets: uint64(c.out), Bytes: uint64(c.outBytes)},
		RTCPOut: udpmux.DestStats{Packets: uint64(c.rtcpOut), Bytes: uint64(c.rtcpOutBytes)},
		Dropped: map[string]uint64{
			media.DropTruncated: uint64(c.truncated), media.DropBadVersion: uint64(c.badVer), media.DropDirection: uint64(c.dirn),
			media.DropConsent: 0,
		},
	}
}

// expectStats waits until the link's counters are exactly want. The writer
// counts a datagram after sendmmsg returns, which may be after the endpoint
// has read it, hence the wait.
func expectStats(t *testing.T, name string, l *Link, want counts) {
	t.Helper()
	w := want.stats()
	testutil.WaitUntil(t, arrival, func() string {
		got := l.Stats()
		got.Quality = Quality{} // quality_test.go
		if !reflect.DeepEqual(got, w) {
			return fmt.Sprintf("%s stats\n%+v\nwant\n%+v", name, got, w)
		}
		return ""
	})
	if tr := l.Track(); tr != nil {
		if n, b := tr.Stats(); n != uint64(want.in) || b != uint64(want.inBytes) {
			t.Errorf("%s track stats %d packets %d bytes, want %d %d", name, n, b, want.in, want.inBytes)
		}
	}
}

func expectSocket(t *testing.T, name string, s *udpmux.Socket, received, unknown int) {
	t.Helper()
	testutil.WaitUntil(t, arrival, func() string {
		st := s.Stats()
		if st.Received != uint64(received) || st.UnknownSource != uint64(unknown) ||
			st.Oversize != 0 || st.ReadErrors != 0 || st.QueueDrops != 0 {
			return fmt.Sprintf("%s socket stats %+v, want %d received, %d unknown, no errors or drops", name, st, received, unknown)
		}
		return ""
	})
}

// rtpPacket builds a varied but deterministic RTP packet: some with CSRCs,
// some with a header extension, some with padding, payload sizes from 1 to
// maxPayload octets.
func rtpPacket(t testing.TB, ssrc uint32, seq uint16, maxPayload int) []byte {
	t.Helper()
	h := rtp.Header{
		Version: 2, PayloadType: 96, SequenceNumber: seq, Timestamp: 3000 * uint32(seq), SSRC: ssrc,
		Marker: seq%4 == 0,
	}
	if seq%5 == 1 {
		h.CSRC = []uint32{ssrc + 1, ssrc + 2}
	}
	if seq%3 == 2 {
		if err := h.SetExtensionWithProfile(1, []byte{byte(seq), byte(ssrc)}, rtp.ExtensionProfileOneByte); err != nil {
			t.Fatal(err)
		}
	}
	if seq%7 == 3 {
		h.Padding, h.PaddingSize = true, byte(1+seq%4)
	}
	payload := make([]byte, 1+(int(seq)*131+int(ssrc))%maxPayload)
	for i := range payload {
		payload[i] = byte(int(seq) + i*int(ssrc))
	}
	b, err := (&rtp.Packet{Header: h, Payload: payload}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ssrcOf(b []byte) uint32 { return binary.BigEndian.Uint32(b[8:12]) }

func rtcpBytes(t testing.TB, pkts ...rtcp.Packet) []byte {
	t.Helper()
	b, err := rtcp.Marshal(pkts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rr(ssrc uint32) []byte {
	b, err := (&rtcp.ReceiverReport{SSRC: ssrc, Reports: []rtcp.ReceptionReport{{SSRC: 0xabc, LastSequenceNumber: ssrc}}}).Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func total(bs ...[]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}

// (a) Three sendrecv endpoints: each gets the other two's packets byte for
// byte and in order, never its own.
func TestFanOutThreeSendRecv(t *testing.T) {
	v := newEnv(t)
	eps := []*endpoint{newPairEndpoint(t, "a"), newPairEndpoint(t, "b"), newPairEndpoint(t, "c")}
	links := make([]*Link, len(eps))
	for i, e := range eps {
		links[i] = v.open(t, e, Config{Kind: media.Audio})
	}
	ssrc := func(i int) uint32 { return uint32(0x1000 * (i + 1)) }
	sent := make([][][]byte, len(eps))

	// Lock-step rounds: everyone sends one packet, everyone reads two.
	const rounds = 40
	for r := range rounds {
		for i, e := range eps {
			b := rtpPacket(t, ssrc(i), uint16(r), 1200)
			sent[i] = append(sent[i], b)
			send(t, e.rtp, v.socks.RTP, b)
		}
		for i, e := range eps {
			got := map[uint32][]byte{}
			for range len(eps) - 1 {
				b := recv(t, e.rtp, v.socks.RTP, fmt.Sprintf("%s round %d", e.name, r))
				s := ssrcOf(b)
				if s == ssrc(i) {
					t.Fatalf("%s got its own packet back: % x", e.name, b)
				}
				if got[s] != nil {
					t.Fatalf("%s got two packets of SSRC %x in round %d", e.name, s, r)
				}
				got[s] = b
			}
			for j := range eps {
				if j != i && !bytes.Equal(got[ssrc(j)], sent[j][r]) {
					t.Fatalf("%s round %d: from %s got\n% x\nwant\n% x", e.name, r, eps[j].name, got[ssrc(j)], sent[j][r])
				}
			}
		}
	}

	// Bursts: everyone sends at once; per sender the order must hold.
	const burst = 20
	for i, e := range eps {
		for k := range burst {
			b := rtpPacket(t, ssrc(i), uint16(rounds+k), 200)
			sent[i] = append(sent[i], b)
			send(t, e.rtp, v.socks.RTP, b)
		}
	}
	for i, e := range eps {
		next := make([]int, len(eps)) // index into sent[j] of the next expected packet
		for j := range next {
			next[j] = rounds
		}
		for range (len(eps) - 1) * burst {
			b := recv(t, e.rtp, v.socks.RTP, e.name+" burst")
			j := int(ssrcOf(b)/0x1000) - 1
			if j == i {
				t.Fatalf("%s got its own packet back: % x", e.name, b)
			}
			if j < 0 || j >= len(eps) || next[j] >= len(sent[j]) {
				t.Fatalf("%s got an unexpected packet: % x", e.name, b)
			}
			if !bytes.Equal(b, sent[j][next[j]]) {
				t.Fatalf("%s: packet %d from %s out of order or changed:\n% x\nwant\n% x", e.name, next[j], eps[j].name, b, sent[j][next[j]])
			}
			next[j]++
		}
	}

	// No stray echo, no RTCP, nothing else.
	expectQuiet(t, eps...)
	n := rounds + burst
	for i, l := range links {
		var out int
		for j := range eps {
			if j != i {
				out += total(sent[j]...)
			}
		}
		expectStats(t, eps[i].name, l, counts{in: n, inBytes: total(sent[i]...), out: 2 * n, outBytes: out})
	}
	expectSocket(t, "rtp", v.socks.RTP, 3*n, 0)
	expectSocket(t, "rtcp", v.socks.RTCP, 0, 0)
}

// (b) A sendonly endpoint gets nothing; a recvonly endpoint's media is
// dropped and counted.
func TestDirections(t *testing.T) {
	v := newEnv(t)
	s, r, x := newPairEndpoint(t, "sendonly"), newPairEndpoint(t, "recvonly"), newPairEndpoint(t, "sendrecv")
	ls := v.open(t, s, Config{Direction: media.SendOnly})
	lr := v.open(t, r, Config{Direction: media.RecvOnly})
	lx := v.open(t, x, Config{Direction: media.SendRecv})
	if ls.Track() == nil || lx.Track() == nil {
		t.Fatal("sending endpoint has no track")
	}
	if lr.Track() != nil {
		t.Fatal("recvonly endpoint has a track")
	}

	var fromS, fromR, fromX [][]byte
	for i := range 5 {
		b := rtpPacket(t, 0x5, uint16(i), 500)
		fromS = append(fromS, b)
		send(t, s.rtp, v.socks.RTP, b)
	}
	expect(t, r.rtp, v.socks.RTP, "recvonly gets sendonly's", fromS...)
	expect(t, x.rtp, v.socks.RTP, "sendrecv gets sendonly's", fromS...)

	for i := range 4 {
		b := rtpPacket(t, 0x7, uint16(i), 500)
		fromR = append(fromR, b)
		send(t, r.rtp, v.socks.RTP, b)
	}
	for i := range 3 {
		b := rtpPacket(t, 0x9, uint16(i), 500)
		fromX = append(fromX, b)
		send(t, x.rtp, v.socks.RTP, b)
	}
	expect(t, r.rtp, v.socks.RTP, "recvonly gets sendrecv's", fromX...)
	expectStats(t, "recvonly", lr, counts{out: 8, outBytes: total(fromS...) + total(fromX...), dirn: 4})
	expectQuiet(t, s, r, x)

	expectStats(t, "sendonly", ls, counts{in: 5, inBytes: total(fromS...)})
	expectStats(t, "sendrecv", lx, counts{in: 3, inBytes: total(fromX...), out: 5, outBytes: total(fromS...)})
	expectSocket(t, "rtp", v.socks.RTP, 12, 0)
}

// (c) Audio and video links of one room do not see each other's media or
// RTCP.
func TestKindsDoNotMix(t *testing.T) {
	v := newEnv(t)
	a1, a2 := newPairEndpoint(t, "audio1"), newPairEndpoint(t, "audio2")
	v1, v2 := newPairEndpoint(t, "video1"), newPairEndpoint(t, "video2")
	la1 := v.open(t, a1, Config{Kind: media.Audio})
	la2 := v.open(t, a2, Config{Kind: media.Audio})
	lv1 := v.open(t, v1, Config{Kind: media.Video})
	lv2 := v.open(t, v2, Config{Kind: media.Video})

	var audio, video [][]byte
	for i := range 3 {
		a := rtpPacket(t, 0xa, uint16(i), 160)
		w := rtpPacket(t, 0xb, uint16(i), 1200)
		audio, video = append(audio, a), append(video, w)
		send(t, a1.rtp, v.socks.RTP, a)
		send(t, v1.rtp, v.socks.RTP, w)
	}
	aRR, vRR := rr(0xa), rr(0xb)
	send(t, a1.rtcp, v.socks.RTCP, aRR)
	send(t, v1.rtcp, v.socks.RTCP, vRR)

	expect(t, a2.rtp, v.socks.RTP, "audio2", audio...)
	expect(t, v2.rtp, v.socks.RTP, "video2", video...)
	expect(t, a2.rtcp, v.socks.RTCP, "audio2 rtcp", aRR)
	expect(t, v2.rtcp, v.socks.RTCP, "video2 rtcp", vRR)
	expectQuiet(t, a1, a2, v1, v2)

	expectStats(t, "audio1", la1, counts{in: 3, inBytes: total(audio...), rtcpIn: 1})
	expectStats(t, "video1", lv1, counts{in: 3, inBytes: total(video...), rtcpIn: 1})
	expectStats(t, "audio2", la2, counts{out: 3, outBytes: total(audio...), rtcpOut: 1, rtcpOutBytes: len(aRR)})
	expectStats(t, "video2", lv2, counts{out: 3, outBytes: total(video...), rtcpOut: 1, rtcpOutBytes: len(vRR)})
}

// (d) Datagrams that are not RTP (or RTCP on the RTCP port) are dropped and
// counted, and the link keeps working.
func TestInvalidDropped(t *testing.T) {
	v := newEnv(t)
	x, y := newPairEndpoint(t, "x"), newPairEndpoint(t, "y")
	m := newEndpoint(t, "mux", true)
	lx := v.open(t, x, Config{})
	ly := v.open(t, y, Config{})
	lm := v.open(t, m, Config{RTCPMux: true})

	good := rtpPacket(t, 0x42, 1, 300)
	withVer := func(b []byte, ver byte) []byte {
		b = append([]byte(nil), b...)
		b[0] = b[0]&0x3f | ver<<6
		return b
	}
	csrc := rtpPacket(t, 0x42, 6, 10) // seq 6: two CSRCs and 3 octets of payload
	csrcTooMany := append([]byte(nil), csrc...)
	csrcTooMany[0] |= 0x0f
	ext := rtpPacket(t, 0x42, 2, 4) // seq 2: extension, payload of at most 4 octets
	extTooLong := append([]byte(nil), ext...)
	binary.BigEndian.PutUint16(extTooLong[14:], 200)
	padded := rtpPacket(t, 0x42, 3, 20) // seq 3: padding
	padTooLong := append([]byte(nil), padded...)
	padTooLong[len(padTooLong)-1] = 255

	truncated := [][]byte{
		{}, // an empty datagram
		good[:11],
		csrcTooMany,
		extTooLong,
		padTooLong,
	}
	badVersion := [][]byte{
		[]byte("not RTP at all"), // 'n' = 0b01…: version 1
		bytes.Repeat([]byte{0xff}, 20),
		withVer(good, 1),
		withVer(good, 0),
	}
	for _, b := range append(append([][]byte(nil), truncated...), badVersion...) {
		send(t, x.rtp, v.socks.RTP, b)
	}
	send(t, x.rtp, v.socks.RTP, good)
	// Datagrams from one source are handled in order, so the first thing y
	// gets must be the good packet.
	expect(t, y.rtp, v.socks.RTP, "y after garbage", good)

	report := rtcpBytes(t, &rtcp.ReceiverReport{SSRC: 0x42}, &rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{
		Source: 0x42, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "x@convene"}},
	}}})
	rtcpTruncated := [][]byte{report[:3], report[:len(report)-4]}
	rtcpBad := [][]byte{withVer(report, 1), []byte("hello")}
	for _, b := range append(append([][]byte(nil), rtcpTruncated...), rtcpBad...) {
		send(t, x.rtcp, v.socks.RTCP, b)
	}
	send(t, x.rtcp, v.socks.RTCP, report)
	expect(t, y.rtcp, v.socks.RTCP, "y rtcp after garbage", report)
	expect(t, m.rtp, v.socks.RTP, "mux endpoint", good, report)

	// A muxing endpoint's malformed RTCP on the RTP port counts the same way.
	send(t, m.rtp, v.socks.RTP, report[:len(report)-1])
	send(t, m.rtp, v.socks.RTP, withVer(report, 3))

	// Still working.
	good2 := rtpPacket(t, 0x42, 4, 300)
	send(t, x.rtp, v.socks.RTP, good2)
	expect(t, y.rtp, v.socks.RTP, "y after recovery", good2)
	expect(t, m.rtp, v.socks.RTP, "mux endpoint after recovery", good2)
	expectQuiet(t, x, y, m)

	expectStats(t, "x", lx, counts{
		in: 2, inBytes: len(good) + len(good2), rtcpIn: 1,
		truncated: len(truncated) + len(rtcpTruncated), badVer: len(badVersion) + len(rtcpBad),
	})
	expectStats(t, "y", ly, counts{out: 2, outBytes: len(good) + len(good2), rtcpOut: 1, rtcpOutBytes: len(report)})
	expectStats(t, "mux", lm, counts{
		out: 2, outBytes: len(good) + len(good2), rtcpOut: 1, rtcpOutBytes: len(report), truncated: 1, badVer: 1,
	})
	expectSocket(t, "rtp", v.socks.RTP, len(truncated)+len(badVersion)+2+2, 0)
	expectSocket(t, "rtcp", v.socks.RTCP, len(rtcpTruncated)+len(rtcpBad)+1, 0)
}

// (e) RTCP from a member's RTCP address reaches every other member's RTCP
// address: port+1 by default, an explicit address, or the RTP address of a
// muxing endpoint, through the RTP socket.
func TestRTCPForwarding(t *testing.T) {
	v := newEnv(t)
	a, b := newPairEndpoint(t, "a"), newPairEndpoint(t, "b")
	d := newEndpoint(t, "explicit", false)
	m1, m2 := newEndpoint(t, "mux1", true), newEndpoint(t, "mux2", true)
	la := v.open(t, a, Config{})
	lb := v.open(t, b, Config{})
	ld := v.open(t, d, Config{RemoteRTCP: addrOf(d.rtcp)})
	lm1 := v.open(t, m1, Config{RTCPMux: true})
	lm2 := v.open(t, m2, Config{RTCPMux: true})

	if got, want := la.Config().RemoteRTCP, addrOf(a.rtcp); got != want {
		t.Fatalf("default RemoteRTCP %v, want %v (RTP port + 1)", got, want)
	}
	if got, want := lm1.Config().RemoteRTCP, addrOf(m1.rtp); got != want {
		t.Fatalf("muxed RemoteRTCP %v, want %v", got, want)
	}

	// RR (+SDES) from a's RTCP port.
	fromA := rtcpBytes(t, &rtcp.ReceiverReport{SSRC: 0xa, Reports: []rtcp.ReceptionReport{{SSRC: 0xb, Jitter: 5}}},
		&rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{Source: 0xa, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "a"}}}}})
	send(t, a.rtcp, v.socks.RTCP, fromA)
	expect(t, b.rtcp, v.socks.RTCP, "b from a", fromA)
	expect(t, d.rtcp, v.socks.RTCP, "explicit from a", fromA)
	expect(t, m1.rtp, v.socks.RTP, "mux1 from a", fromA)
	expect(t, m2.rtp, v.socks.RTP, "mux2 from a", fromA)

	// An RR on mux1's one port is RTCP (PT 201), forwarded through both sockets.
	fromM := rr(0x1)
	send(t, m1.rtp, v.socks.RTP, fromM)
	expect(t, a.rtcp, v.socks.RTCP, "a from mux1", fromM)
	expect(t, b.rtcp, v.socks.RTCP, "b from mux1", fromM)
	expect(t, d.rtcp, v.socks.RTCP, "explicit from mux1", fromM)
	expect(t, m2.rtp, v.socks.RTP, "mux2 from mux1", fromM)

	// RTP on the same muxed port is still RTP, and goes to RTP addresses.
	media := rtpPacket(t, 0x1, 1, 300)
	send(t, m1.rtp, v.socks.RTP, media)
	for _, e := range []*endpoint{a, b, d, m2} {
		expect(t, e.rtp, v.socks.RTP, e.name+" media from mux1", media)
	}
	expectQuiet(t, a, b, d, m1, m2)

	expectStats(t, "a", la, counts{rtcpIn: 1, out: 1, outBytes: len(media), rtcpOut: 1, rtcpOutBytes: len(fromM)})
	both := counts{out: 1, outBytes: len(media), rtcpOut: 2, rtcpOutBytes: len(fromA) + len(fromM)}
	expectStats(t, "b", lb, both)
	expectStats(t, "explicit", ld, both)
	expectStats(t, "mux2", lm2, both)
	expectStats(t, "mux1", lm1, counts{in: 1, inBytes: len(media), rtcpIn: 1, rtcpOut: 1, rtcpOutBytes: len(fromA)})
	expectSocket(t, "rtp", v.socks.RTP, 2, 0)
	expectSocket(t, "rtcp", v.socks.RTCP, 1, 0)
}

// (f) An address belongs to one link. A failed Open leaves no registration
// and no member behind, and does not disturb the link that holds the address.
func TestAddressInUse(t *testing.T) {
	v := newEnv(t)
	x, y := newPairEndpoint(t, "x"), newPairEndpoint(t, "y")
	lx := v.open(t, x, Config{})
	ly := v.open(t, y, Config{})

	// Same RTP address, different ID.
	if l, err := v.tryOpen(x, Config{ID: "x-again"}); !errors.Is(err, udpmux.ErrAddrInUse) || l != nil {
		t.Fatalf("second link on %v: %v, %v; want ErrAddrInUse", addrOf(x.rtp), l, err)
	}
	// Free RTP address, RTCP address taken by x.
	z := newEndpoint(t, "z", false)
	if l, err := v.tryOpen(z, Config{RemoteRTCP: addrOf(x.rtcp)}); !errors.Is(err, udpmux.ErrAddrInUse) || l != nil {
		t.Fatalf("link with x's RTCP address: %v, %v; want ErrAddrInUse", l, err)
	}
	// Free addresses, ID taken by x.
	w := newEndpoint(t, "w", false)
	if l, err := v.tryOpen(w, Config{ID: "x", RemoteRTCP: addrOf(w.rtcp)}); !errors.Is(err, broker.ErrMemberExists) || l != nil {
		t.Fatalf("link with x's ID: %v, %v; want ErrMemberExists", l, err)
	}
	if n := v.room.Members(); n != 2 {
		t.Fatalf("%d members after failed opens, want 2", n)
	}
	if n := len(v.room.Tracks()); n != 2 {
		t.Fatalf("%d tracks after failed opens, want 2", n)
	}

	// Nothing of z or w stayed registered: their datagrams have no handler.
	send(t, z.rtp, v.socks.RTP, rtpPacket(t, 0xf, 1, 10))
	send(t, w.rtp, v.socks.RTP, rtpPacket(t, 0xf, 2, 10))
	send(t, w.rtcp, v.socks.RTCP, rr(0xf))
	expectSocket(t, "rtp", v.socks.RTP, 2, 2)
	expectSocket(t, "rtcp", v.socks.RTCP, 1, 1)

	// x's link is intact in both directions and on RTCP.
	px, py := rtpPacket(t, 0x1, 1, 100), rtpPacket(t, 0x2, 1, 100)
	send(t, x.rtp, v.socks.RTP, px)
	send(t, y.rtp, v.socks.RTP, py)
	expect(t, y.rtp, v.socks.RTP, "y from x", px)
	expect(t, x.rtp, v.socks.RTP, "x from y", py)
	report := rr(0x1)
	send(t, x.rtcp, v.socks.RTCP, report)
	expect(t, y.rtcp, v.socks.RTCP, "y rtcp from x", report)
	expectQuiet(t, x, y, z, w)
	expectStats(t, "x", lx, counts{in: 1, inBytes: len(px), rtcpIn: 1, out: 1, outBytes: len(py)})
	expectStats(t, "y", ly, counts{in: 1, inBytes: len(py), out: 1, outBytes: len(px), rtcpOut: 1, rtcpOutBytes: len(report)})

	// The addresses are free: z and w can now attach.
	v.open(t, z, Config{RemoteRTCP: addrOf(z.rtcp)})
	v.open(t, w, Config{RemoteRTCP: addrOf(w.rtcp)})
	if n := v.room.Members(); n != 4 {
		t.Fatalf("%d members, want 4", n)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	v := newEnv(t)
	ok := netip.MustParseAddrPort("127.0.0.1:5004")
	for name, cfg := range map[string]Config{
		"direction":  {ID: "a", Direction: "inactive", Remote: ok},
		"no remote":  {ID: "a", Direction: media.SendRecv},
		"port 0":     {ID: "a", Direction: media.SendRecv, Remote: netip.MustParseAddrPort("127.0.0.1:0")},
		"port 65535": {ID: "a", Direction: media.SendRecv, Remote: netip.MustParseAddrPort("127.0.0.1:65535")},
	} {
		if l, err := Open(cfg, v.socks, v.room); err == nil || l != nil {
			t.Errorf("%s: Open succeeded", name)
		}
	}
	if v.room.Members() != 0 {
		t.Fatal("rejected config joined the room")
	}
	// With mux, port 65535 needs no RTCP port.
	l, err := Open(Config{ID: "a", Direction: media.SendRecv, Remote: netip.MustParseAddrPort("127.0.0.1:65535"), RTCPMux: true}, v.socks, v.room)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// (g) After Close the endpoint is a stranger to the sockets and gets nothing.
func TestCloseDetaches(t *testing.T) {
	v := newEnv(t)
	a, b, c := newPairEndpoint(t, "a"), newPairEndpoint(t, "b"), newPairEndpoint(t, "c")
	la := v.open(t, a, Config{})
	lb := v.open(t, b, Config{})
	lc := v.open(t, c, Config{})

	first := rtpPacket(t, 0xa, 1, 200)
	send(t, a.rtp, v.socks.RTP, first)
	expect(t, b.rtp, v.socks.RTP, "b", first)
	expect(t, c.rtp, v.socks.RTP, "c", first)

	la.Close()
	la.Close() // idempotent
	if n := v.room.Members(); n != 2 {
		t.Fatalf("%d members after close, want 2", n)
	}
	for _, tr := range v.room.Tracks() {
		if tr.Publisher() == "a" {
			t.Fatal("closed link's track still in the room")
		}
	}

	for i := range 3 {
		send(t, a.rtp, v.socks.RTP, rtpPacket(t, 0xa, uint16(2+i), 200))
	}
	send(t, a.rtcp, v.socks.RTCP, rr(0xa))
	send(t, a.rtcp, v.socks.RTCP, rr(0xa))
	expectSocket(t, "rtp", v.socks.RTP, 4, 3)
	expectSocket(t, "rtcp", v.socks.RTCP, 2, 2)

	var fromB [][]byte
	for i := range 2 {
		p := rtpPacket(t, 0xb, uint16(i), 200)
		fromB = append(fromB, p)
		send(t, b.rtp, v.socks.RTP, p)
	}
	report := rr(0xb)
	send(t, b.rtcp, v.socks.RTCP, report)
	expect(t, c.rtp, v.socks.RTP, "c from b", fromB...)
	expect(t, c.rtcp, v.socks.RTCP, "c rtcp from b", report)
	expectQuiet(t, a, b, c)

	expectStats(t, "a", la, counts{in: 1, inBytes: len(first)})
	expectStats(t, "b", lb, counts{in: 2, inBytes: total(fromB...), rtcpIn: 1, out: 1, outBytes: len(first)})
	expectStats(t, "c", lc, counts{
		out: 3, outBytes: len(first) + total(fromB...), rtcpOut: 1, rtcpOutBytes: len(report),
	})
	expectSocket(t, "rtp", v.socks.RTP, 6, 3)
	expectSocket(t, "rtcp", v.socks.RTCP, 3, 2)
}
