package udpmux

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// A reader held up leaves datagrams in the socket's queue: the socket
// counts how long they waited for it and, once the queue overflowed, the
// datagrams the kernel dropped there.
func TestReaderWaitAndSocketDrops(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{ReadBuffer: 1}) // the kernel's smallest buffer
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.info {
		t.Skip("the kernel gives no receive timestamps or drop counts")
	}
	var stalls atomic.Int64 // waits the stall hook heard
	OnStall(func(d time.Duration) {
		if d > StallAt {
			stalls.Add(1)
		}
	})
	t.Cleanup(func() { OnStall(nil) })
	sender := udp(t)
	hold := make(chan struct{})
	var got int
	first := true
	if err := s.Register(addrOf(sender), handlerFunc(func(p *media.Packet, _ netip.AddrPort) {
		if first {
			first = false
			<-hold // the reader stalls here, as one the machine does not schedule
		}
		got++
		p.Release()
	})); err != nil {
		t.Fatal(err)
	}
	to := s.conn.LocalAddr()
	sendN := func(n int) {
		for range n {
			if _, err := sender.WriteTo(make([]byte, 200), to); err != nil {
				t.Fatal(err)
			}
		}
	}
	sendN(1)
	testutil.WaitFor(t, 5*time.Second, "the first datagram", func() bool { return s.Stats().Received == 1 })
	sendN(500) // far more than a minimal buffer holds
	stalled := 200 * time.Millisecond
	time.Sleep(stalled)
	close(hold)
	// The kernel tells the drop count with the datagrams queued after
	// the drops: send more until it has told, and every datagram sent
	// is read or counted dropped.
	sent := uint64(501)
	testutil.WaitFor(t, 5*time.Second, "every datagram read or counted dropped", func() bool {
		st := s.Stats()
		if st.SocketDrops > 0 && st.Received+st.SocketDrops == sent {
			return true
		}
		sendN(1)
		sent++
		return false
	})
	st := s.Stats()
	var waitedLong, total uint64
	for i, n := range st.ReadDelay.Counts {
		total += n
		if i >= len(DelayBuckets) || DelayBuckets[i] > 0.1 {
			waitedLong += n
		}
	}
	if total != st.Received || waitedLong == 0 {
		t.Fatalf("read delay %v over %d datagrams read: none waited past 100 ms of a %v stall", st.ReadDelay.Counts, st.Received, stalled)
	}
	if n := stalls.Load(); n == 0 || uint64(n) > waitedLong {
		t.Fatalf("the stall hook heard %d waits past %v; the histogram has %d", n, StallAt, waitedLong)
	}
}

func TestParseRecvInfo(t *testing.T) {
	msg := func(typ int32, data []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(data)))
		if unix.SizeofCmsghdr == 16 {
			binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(len(data))))
			binary.NativeEndian.PutUint32(b[8:], unix.SOL_SOCKET)
			binary.NativeEndian.PutUint32(b[12:], uint32(typ))
		} else {
			binary.NativeEndian.PutUint32(b, uint32(unix.CmsgLen(len(data))))
			binary.NativeEndian.PutUint32(b[4:], unix.SOL_SOCKET)
			binary.NativeEndian.PutUint32(b[8:], uint32(typ))
		}
		copy(b[unix.CmsgLen(0):], data)
		return b
	}
	ts := make([]byte, 16)
	binary.NativeEndian.PutUint64(ts, 1700000000)
	binary.NativeEndian.PutUint64(ts[8:], 250)
	drops := binary.NativeEndian.AppendUint32(nil, 7)
	both := append(msg(unix.SCM_TIMESTAMPNS, ts), msg(unix.SO_RXQ_OVFL, drops)...)
	if ri := parseRecvInfo(both); ri.stampNs != 1700000000*1e9+250 || !ri.hasDrops || ri.drops != 7 {
		t.Fatalf("both: %+v", ri)
	}
	if ri := parseRecvInfo(msg(unix.SCM_TIMESTAMPNS, ts)); ri.hasDrops || ri.stampNs == 0 {
		t.Fatalf("stamp only: %+v", ri)
	}
	// Cut short, or lying about its length: nothing read past the end.
	for _, b := range [][]byte{both[:5], both[:unix.CmsgLen(0)+3], nil} {
		if ri := parseRecvInfo(b); ri.hasDrops {
			t.Fatalf("%d bytes: %+v", len(b), ri)
		}
	}
	bad := msg(unix.SO_RXQ_OVFL, drops)
	binary.NativeEndian.PutUint32(bad, 1<<30)
	if ri := parseRecvInfo(bad); ri.hasDrops {
		t.Fatalf("overlong: %+v", ri)
	}
}

func FuzzParseRecvInfo(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) { parseRecvInfo(b) })
}

// The reader names an IPv6 source as the net package does, so its handler
// is found; a datagram from an address nobody registered is counted.
func TestReadIPv6Source(t *testing.T) {
	s, err := Listen("[::1]:0", Options{})
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan netip.AddrPort, 1)
	if err := s.Register(addrOf(c), handlerFunc(func(p *media.Packet, from netip.AddrPort) {
		p.Release()
		got <- from
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo([]byte("hello"), s.conn.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	select {
	case from := <-got:
		if from != addrOf(c) {
			t.Fatalf("from %v, want %v", from, addrOf(c))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing routed from %v: %+v", addrOf(c), s.Stats())
	}
}
