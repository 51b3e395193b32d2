package kfwd

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/testutil"
)

// testMaxPayload is the largest UDP payload the test forwarders forward.
const testMaxPayload = 1200

// open attaches a forwarder for addr, or skips when this process may not
// load eBPF programs (not root). CI runs as root, so there it always runs.
func open(t *testing.T, addr string) *Forwarder {
	t.Helper()
	testutil.NeedRoot(t, "loading an eBPF program")
	f, err := Open(netip.MustParseAddr(addr), 1024, testMaxPayload)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func udp(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ap(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

func key(t testing.TB, src, dst netip.AddrPort) Key {
	t.Helper()
	k, ok := MakeKey(src, dst)
	if !ok {
		t.Fatalf("MakeKey(%v, %v) refused", src, dst)
	}
	return k
}

// recv reads one datagram within a second, or returns nil.
func recv(c *net.UDPConn) ([]byte, netip.AddrPort) {
	buf := make([]byte, 2048)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, netip.AddrPort{}
	}
	return buf[:n], from
}

func rtpPacket(seq uint16, n int) []byte {
	p := make([]byte, 12+n)
	p[0], p[1] = 0x80, 0
	binary.BigEndian.PutUint16(p[2:], seq)
	for i := 12; i < len(p); i++ {
		p[i] = byte(i * int(seq))
	}
	return p
}

func TestLoopbackFlowIsRewrittenAndCounted(t *testing.T) {
	f := open(t, "127.0.0.1")
	a := udp(t, "127.0.0.2:0")        // the sender
	relayIn := udp(t, "127.0.0.1:0")  // where it sends
	relayOut := udp(t, "127.0.0.1:0") // the address the receiver must see
	b := udp(t, "127.0.0.3:0")        // the receiver
	if err := f.Add(key(t, ap(a), ap(relayIn)), key(t, ap(relayOut), ap(b))); err != nil {
		t.Fatal(err)
	}
	var sent int
	for seq := uint16(1); seq <= 50; seq++ {
		p := rtpPacket(seq, 160)
		if _, err := a.WriteToUDPAddrPort(p, ap(relayIn)); err != nil {
			t.Fatal(err)
		}
		sent += len(p)
		got, from := recv(b)
		if !bytes.Equal(got, p) {
			t.Fatalf("seq %d: receiver got %x, want %x", seq, got, p)
		}
		if from != ap(relayOut) {
			t.Fatalf("seq %d: came from %v, want the relay's other socket %v", seq, from, ap(relayOut))
		}
	}
	// Not RTP: left alone, so the relay's own socket gets it.
	stun := []byte{0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42}
	if _, err := a.WriteToUDPAddrPort(stun, ap(relayIn)); err != nil {
		t.Fatal(err)
	}
	if got, _ := recv(relayIn); !bytes.Equal(got, stun) {
		t.Fatalf("relay socket got %x, want the STUN bytes", got)
	}
	// Another source is not this flow.
	other := udp(t, "127.0.0.2:0")
	p := rtpPacket(99, 20)
	if _, err := other.WriteToUDPAddrPort(p, ap(relayIn)); err != nil {
		t.Fatal(err)
	}
	if got, _ := recv(relayIn); !bytes.Equal(got, p) {
		t.Fatalf("relay socket got %x from another source, want it untouched", got)
	}
	var seen Counts
	if err := f.Each(func(k Key, c Counts) { seen = c }); err != nil {
		t.Fatal(err)
	}
	c := f.Delete(key(t, ap(a), ap(relayIn)))
	// skb->len counts the IP and UDP headers (and Ethernet's on loopback):
	// each datagram adds its payload plus 14+20+8.
	if c.Packets != 50 || c.Bytes != uint64(sent+50*42) || seen != c {
		t.Fatalf("counts %+v (Each saw %+v), want 50 packets, %d bytes", c, seen, sent+50*42)
	}
	if _, err := a.WriteToUDPAddrPort(rtpPacket(100, 10), ap(relayIn)); err != nil {
		t.Fatal(err)
	}
	if got, _ := recv(relayIn); got == nil {
		t.Fatal("after Delete the relay socket got nothing")
	}
}

// TestChecksumsStayValid sends through a raw socket with a real UDP checksum
// (loopback sockets otherwise leave it to the "hardware", so the receiver
// would not check it); a wrong rewrite would be dropped as InCsumErrors.
func TestChecksumsStayValid(t *testing.T) {
	rf := newRawFlow(t, "127.0.0.2:40000")
	relayIn, relayOut, b, src := rf.relayIn, rf.relayOut, rf.b, rf.src
	for _, n := range []int{0, 1, 171, 1000} {
		p := rtpPacket(uint16(n+1), n)
		rf.send(ipUDP(src, ap(relayIn), p))
		got, from := recv(b)
		if !bytes.Equal(got, p) || from != ap(relayOut) {
			t.Fatalf("%d-byte payload: got %x from %v; want it from %v (a bad checksum is dropped)", n, got, from, ap(relayOut))
		}
	}
}

// ipUDP builds an IPv4/UDP datagram with both checksums computed.
func ipUDP(src, dst netip.AddrPort, payload []byte) []byte {
	ul := 8 + len(payload)
	p := make([]byte, 20+ul)
	p[0], p[8], p[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[10:], ^fold(sum(p[:20])))
	u := p[20:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ul))
	copy(u[8:], payload)
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, 17, byte(ul>>8), byte(ul))
	c := ^fold(sum(pseudo) + sum(u))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return p
}

func sum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestAddRefusesFlowsAcrossLoopback(t *testing.T) {
	f := open(t, "127.0.0.1")
	in := key(t, netip.MustParseAddrPort("127.0.0.2:1000"), netip.MustParseAddrPort("127.0.0.1:2000"))
	out := key(t, netip.MustParseAddrPort("127.0.0.1:2002"), netip.MustParseAddrPort("192.0.2.7:3000"))
	if err := f.Add(in, out); err == nil {
		t.Fatal("a loopback forwarder accepted a flow to 192.0.2.7")
	}
	if _, ok := MakeKey(netip.MustParseAddrPort("[::1]:1"), netip.MustParseAddrPort("127.0.0.1:2")); ok {
		t.Fatal("MakeKey accepted IPv6")
	}
}

// TestUnusualDatagramsAreLeftAlone sends datagrams of a forwarded flow that
// the program must not touch: IP options, a fragment, a payload shorter
// than any RTCP packet. Each reaches the relay's own socket as sent.
func TestUnusualDatagramsAreLeftAlone(t *testing.T) {
	rf := newRawFlow(t, "127.0.0.2:40002")
	f, relayIn, src, send := rf.f, rf.relayIn, rf.src, rf.send
	short := rtpPacket(1, 0)[:7]
	send(ipUDP(src, ap(relayIn), short))
	if got, _ := recv(relayIn); !bytes.Equal(got, short) {
		t.Fatalf("7-byte payload: relay socket got %x", got)
	}
	// IP options: a 4-byte NOP option list, so the header is 24 bytes.
	p := rtpPacket(2, 20)
	pkt := ipUDP(src, ap(relayIn), p)
	withOpt := append(append(append([]byte{}, pkt[:20]...), 1, 1, 1, 0), pkt[20:]...)
	withOpt[0] = 0x46
	binary.BigEndian.PutUint16(withOpt[2:], uint16(len(withOpt)))
	withOpt[10], withOpt[11] = 0, 0
	binary.BigEndian.PutUint16(withOpt[10:], ^fold(sum(withOpt[:24])))
	send(withOpt)
	if got, _ := recv(relayIn); !bytes.Equal(got, p) {
		t.Fatalf("with IP options: relay socket got %x, want %x", got, p)
	}
	// Two fragments: the first carries the UDP header and 16 bytes, with MF.
	p = rtpPacket(3, 40)
	pkt = ipUDP(src, ap(relayIn), p)
	id := []byte{0x12, 0x34}
	first := append([]byte{}, pkt[:20+24]...)
	copy(first[4:], id)
	first[6] = 0x20 // MF
	binary.BigEndian.PutUint16(first[2:], uint16(len(first)))
	first[10], first[11] = 0, 0
	binary.BigEndian.PutUint16(first[10:], ^fold(sum(first[:20])))
	second := append(append([]byte{}, pkt[:20]...), pkt[20+24:]...)
	copy(second[4:], id)
	binary.BigEndian.PutUint16(second[6:], 3) // offset 24 bytes
	binary.BigEndian.PutUint16(second[2:], uint16(len(second)))
	second[10], second[11] = 0, 0
	binary.BigEndian.PutUint16(second[10:], ^fold(sum(second[:20])))
	send(first)
	send(second)
	if got, _ := recv(relayIn); !bytes.Equal(got, p) {
		t.Fatalf("fragmented: relay socket got %x, want %x", got, p)
	}
	if c := f.Delete(key(t, src, ap(relayIn))); c.Packets != 0 {
		t.Fatalf("the program forwarded %d of them", c.Packets)
	}
}

// rawFlow is a loopback flow from src (a raw socket's forged source, so the
// test sends real checksums) through relayIn, forwarded to b from relayOut.
type rawFlow struct {
	t                    *testing.T
	f                    *Forwarder
	relayIn, relayOut, b *net.UDPConn
	src                  netip.AddrPort
	fd                   int
}

func newRawFlow(t *testing.T, src string) *rawFlow {
	rf := &rawFlow{t: t, f: open(t, "127.0.0.1"), relayIn: udp(t, "127.0.0.1:0"), relayOut: udp(t, "127.0.0.1:0"),
		b: udp(t, "127.0.0.3:0"), src: netip.MustParseAddrPort(src)}
	if err := rf.f.Add(key(t, rf.src, ap(rf.relayIn)), key(t, ap(rf.relayOut), ap(rf.b))); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	rf.fd = fd
	return rf
}

// send sends an IPv4 datagram (header included) through the raw socket.
func (rf *rawFlow) send(pkt []byte) {
	rf.t.Helper()
	if err := unix.Sendto(rf.fd, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		rf.t.Fatal(err)
	}
}

// TestDatagramsUserSpaceChecksAreLeftAlone sends datagrams of a forwarded
// flow that user space refuses or looks at more closely: larger than the
// maximum payload, a CSRC count or header extension that runs past the
// payload, padding, an RTCP packet type. Each reaches the relay's own
// socket as sent (where the relay drops or checks it); a well-formed packet
// with CSRCs and an extension that fit is still forwarded.
func TestDatagramsUserSpaceChecksAreLeftAlone(t *testing.T) {
	rf := newRawFlow(t, "127.0.0.2:40004")
	f, relayIn, src, send := rf.f, rf.relayIn, rf.src, rf.send
	csrcs := rtpPacket(1, 40)
	csrcs[0] = 0x8f // 15 CSRCs: 72 bytes of header in a 52-byte payload
	ext := rtpPacket(2, 20)
	ext[0] |= 0x10
	binary.BigEndian.PutUint16(ext[14:], 100) // 400 bytes of extension
	pad := rtpPacket(3, 20)
	pad[0] |= 0x20
	pad[len(pad)-1] = 4
	rtcp := []byte{0x80, 201, 0, 1, 0, 0, 0, 1}
	for name, p := range map[string][]byte{
		"oversize": rtpPacket(4, testMaxPayload-11), "csrc": csrcs, "extension": ext, "padding": pad, "rtcp": rtcp,
	} {
		send(ipUDP(src, ap(relayIn), p))
		if got, _ := recv(relayIn); !bytes.Equal(got, p) {
			t.Fatalf("%s: relay socket got %x, want it as sent", name, got)
		}
	}
	if c := f.Delete(key(t, src, ap(relayIn))); c.Packets != 0 {
		t.Fatalf("the program forwarded %d of them", c.Packets)
	}
	// Still forwarded: exactly the maximum, and CSRCs plus an extension that fit.
	if err := f.Add(key(t, src, ap(relayIn)), key(t, ap(rf.relayOut), ap(rf.b))); err != nil {
		t.Fatal(err)
	}
	fits := rtpPacket(5, 40)
	fits[0] = 0x92 // X, 2 CSRCs
	binary.BigEndian.PutUint16(fits[22:], 3)
	for _, p := range [][]byte{rtpPacket(6, testMaxPayload-12), fits} {
		send(ipUDP(src, ap(relayIn), p))
		if got, _ := recv(rf.b); !bytes.Equal(got, p) {
			t.Fatalf("%d-byte packet: receiver got %x, want it forwarded", len(p), got)
		}
	}
	if c := f.Delete(key(t, src, ap(relayIn))); c.Packets != 2 {
		t.Fatalf("the program forwarded %d packets, want 2", c.Packets)
	}
}
