package sfu

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestBatchConnKeepsOrderAndCopies writes more than a batch while holding
// the conn, reusing one buffer as pion does, and checks that every
// datagram arrives once, in order, with what it held when written.
func TestBatchConnKeepsOrderAndCopies(t *testing.T) {
	tx, rx := udpPair(t)
	c := newBatchConn(tx)
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	const n = 3*batchMax + 5
	buf := make([]byte, 200)
	c.hold()
	for i := range n {
		binary.BigEndian.PutUint32(buf, uint32(i))
		if _, err := c.WriteToAddrPort(buf, to); err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint32(buf, 0xffffffff) // the caller's again
	}
	c.release()
	for i := range n {
		if got := read(t, rx); got != uint32(i) {
			t.Fatalf("datagram %d: got %d", i, got)
		}
	}
}

// TestBatchConnWritesAtOnceWithoutHolder: pion's own writes (ICE, DTLS,
// RTCP) must not wait for a burst that never comes.
func TestBatchConnWritesAtOnceWithoutHolder(t *testing.T) {
	tx, rx := udpPair(t)
	c := newBatchConn(tx)
	b := binary.BigEndian.AppendUint32(nil, 7)
	if _, err := c.WriteTo(b, rx.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, rx); got != 7 {
		t.Fatalf("got %d", got)
	}
}

func udpPair(t *testing.T) (*net.UDPConn, *net.UDPConn) {
	t.Helper()
	var cs [2]*net.UDPConn
	for i := range cs {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadBuffer(1 << 20)
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs[0], cs[1]
}

func read(t *testing.T, c *net.UDPConn) uint32 {
	t.Helper()
	b := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := c.ReadFromUDPAddrPort(b)
	if err != nil || n < 4 {
		t.Fatalf("read: %d bytes, %v", n, err)
	}
	return binary.BigEndian.Uint32(b)
}
