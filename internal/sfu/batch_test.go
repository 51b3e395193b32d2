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

// TestBatchConnReadsQueuedDatagrams: datagrams that queued on the socket
// (more than one recvmmsg takes) come out one a read, once each, in order,
// with their own sources and lengths; a reader's short buffer gets the
// datagram's head, as recvfrom gives; a read deadline still ends a read
// on an empty socket.
func TestBatchConnReadsQueuedDatagrams(t *testing.T) {
	a, rx := udpPair(t)
	b, _ := udpPair(t)
	c := newBatchConn(rx)
	to := rx.LocalAddr().(*net.UDPAddr)
	const n = 3*readBatchMax + 7
	for i := range n {
		src := a
		if i%3 == 0 {
			src = b
		}
		d := binary.BigEndian.AppendUint32(make([]byte, 0, 4+i), uint32(i))
		d = append(d, make([]byte, i)...) // datagram i is 4+i bytes
		if _, err := src.WriteToUDP(d, to); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := range n {
		k, from, err := c.ReadFromAddrPort(buf)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		want := a.LocalAddr().(*net.UDPAddr).AddrPort()
		if i%3 == 0 {
			want = b.LocalAddr().(*net.UDPAddr).AddrPort()
		}
		if got := binary.BigEndian.Uint32(buf); got != uint32(i) || k != 4+i || from != want {
			t.Fatalf("read %d: datagram %d of %d bytes from %v, want %d bytes from %v", i, got, k, from, 4+i, want)
		}
	}
	if c.rb.datagrams.Load() != n || c.rb.calls.Load() >= n {
		t.Fatalf("%d datagrams in %d recvmmsg calls: not batched", c.rb.datagrams.Load(), c.rb.calls.Load())
	}

	if _, err := a.WriteToUDP(binary.BigEndian.AppendUint32(nil, 0xabcdef01), to); err != nil {
		t.Fatal(err)
	}
	short := make([]byte, 2)
	if k, _, err := c.ReadFrom(short); err != nil || k != 2 || short[0] != 0xab || short[1] != 0xcd {
		t.Fatalf("short read: %d bytes %x, %v", k, short, err)
	}

	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, err := c.ReadFromAddrPort(buf); err == nil {
		t.Fatal("a read on an empty socket past its deadline returned no error")
	}
}
