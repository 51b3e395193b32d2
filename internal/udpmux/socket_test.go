package udpmux

import (
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

func listen(t testing.TB, batch bool) *Socket {
	t.Helper()
	s, err := Listen("127.0.0.1:0", Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func udp(t testing.TB) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func addrOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

type handlerFunc func(p *media.Packet, from netip.AddrPort)

func (f handlerFunc) HandleDatagram(p *media.Packet, from netip.AddrPort) { f(p, from) }

func recvOne(t *testing.T, c *net.UDPConn) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestDemuxBySourceAndFanOut(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run("batch="+strconv.FormatBool(batch), func(t *testing.T) {
			s := listen(t, batch)
			sender := udp(t)
			stranger := udp(t)
			got := make(chan *media.Packet, 10)
			if err := s.Register(addrOf(sender), handlerFunc(func(p *media.Packet, _ netip.AddrPort) { got <- p })); err != nil {
				t.Fatal(err)
			}
			if err := s.Register(addrOf(sender), handlerFunc(nil)); err == nil {
				t.Fatal("second registration of one address accepted")
			}
			to := net.UDPAddrFromAddrPort(s.LocalAddr())
			stranger.WriteToUDP([]byte("nobody knows me"), to)
			sender.WriteToUDP([]byte("hello"), to)
			var p *media.Packet
			select {
			case p = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("no datagram")
			}
			if string(p.Bytes()) != "hello" {
				t.Fatalf("got %q", p.Bytes())
			}
			if st := s.Stats(); st.UnknownSource != 1 {
				t.Errorf("unknown source count %d, want 1", st.UnknownSource)
			}

			// Fan the packet out to three receivers, one reference each.
			recv := []*net.UDPConn{udp(t), udp(t), udp(t)}
			dests := make([]*Dest, len(recv))
			p.Retain(len(recv) - 1)
			for i, c := range recv {
				dests[i] = NewDest(addrOf(c), 8)
				if !s.Send(p, dests[i]) {
					t.Fatal("send dropped")
				}
			}
			for i, c := range recv {
				if b := recvOne(t, c); string(b) != "hello" {
					t.Errorf("receiver %d got %q", i, b)
				}
			}
			// A receiver can read the datagram before the sender's loop
			// counts it: wait for every destination's count.
			testutil.WaitFor(t, 5*time.Second, "every destination's count", func() bool {
				for _, d := range dests {
					if d.Stats().Packets != 1 {
						return false
					}
				}
				return true
			})
			if st := dests[0].Stats(); st.Bytes != 5 || st.Drops != 0 {
				t.Errorf("dest stats %+v", st)
			}
			// Each send of the three waited in a queue: counted once a
			// flush, at least one flush and at most three.
			d := s.Stats().Delay
			var flushes uint64
			for _, n := range d.Counts {
				flushes += n
			}
			if len(d.Counts) != len(DelayBuckets)+1 || flushes < 1 || flushes > 3 || d.Sum <= 0 {
				t.Errorf("queueing delay %+v for 3 datagrams", d)
			}
		})
	}
}

func TestOversizeDropped(t *testing.T) {
	s := listen(t, true)
	c := udp(t)
	var n atomic.Int32
	s.Register(addrOf(c), handlerFunc(func(p *media.Packet, _ netip.AddrPort) { n.Add(1); p.Release() }))
	c.WriteToUDP(make([]byte, media.BufSize+100), net.UDPAddrFromAddrPort(s.LocalAddr()))
	c.WriteToUDP(make([]byte, 12), net.UDPAddrFromAddrPort(s.LocalAddr()))
	testutil.WaitFor(t, 5*time.Second, "the datagram to reach its link", func() bool { return n.Load() == 1 })
	if st := s.Stats(); st.Oversize != 1 {
		t.Fatalf("oversize %d", st.Oversize)
	}
}

// A destination whose queue is full loses packets; the others do not.
func TestPerDestinationBound(t *testing.T) {
	s := listen(t, true)
	slowConn, fastConn := udp(t), udp(t)
	slow := NewDest(addrOf(slowConn), 2)
	fast := NewDest(addrOf(fastConn), 100)
	slow.inflight.Store(2) // two packets stuck in flight: its queue is full
	for i := 0; i < 5; i++ {
		p := media.NewPacket()
		p.SetLen(12)
		p.Retain(1)
		if s.Send(p, slow) {
			t.Fatal("full destination accepted a packet")
		}
		if !s.Send(p, fast) {
			t.Fatal("fast destination dropped")
		}
	}
	testutil.WaitFor(t, 5*time.Second, "the fast receiver's five packets", func() bool { return fast.Stats().Packets == 5 })
	if st := slow.Stats(); st.Drops != 5 || st.Packets != 0 {
		t.Fatalf("slow dest %+v", st)
	}
	if fast.Stats().Drops != 0 {
		t.Fatalf("fast dest dropped %d", fast.Stats().Drops)
	}
}

// Audio queued behind a long video burst is sent before the rest of the burst.
func TestAudioOvertakesVideo(t *testing.T) {
	s := listen(t, true)
	rc := udp(t)
	rc.SetReadBuffer(8 << 20)
	d := NewDest(addrOf(rc), 100000)
	// Queue a video burst and then one audio packet in one go, as if they
	// had arrived while the writer was busy.
	w := s.writerFor(d)
	w.mu.Lock()
	const nVideo = 4 * maxBatch
	for i := 0; i < nVideo; i++ {
		p := media.NewPacket()
		p.Kind = media.Video
		p.SetLen(copy(p.Buffer(), "v"))
		d.inflight.Add(1)
		w.q[media.Video] = append(w.q[media.Video], entry{p, d})
	}
	a := media.NewPacket()
	a.SetLen(copy(a.Buffer(), "a"))
	d.inflight.Add(1)
	w.q[media.Audio] = append(w.q[media.Audio], entry{a, d})
	w.audioLen.Store(1)
	wake := w.sleeping
	w.sleeping = false
	w.mu.Unlock()
	if wake {
		w.wake <- struct{}{}
	}
	buf := make([]byte, 16)
	rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < nVideo+1; i++ {
		n, err := rc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) == "a" {
			if i > 0 {
				t.Fatalf("audio arrived after %d video packets", i)
			}
			return
		}
	}
	t.Fatal("audio never arrived")
}

func TestCloseFlushesQueue(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{Batch: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := udp(t)
	rc.SetReadBuffer(4 << 20)
	d := NewDest(addrOf(rc), 1000)
	for i := 0; i < 500; i++ {
		p := media.NewPacket()
		p.SetLen(100)
		s.Send(p, d)
	}
	s.Close()
	if st := d.Stats(); st.Packets+st.Drops != 500 || st.Drops != 0 {
		t.Fatalf("after close %+v", st)
	}
	p := media.NewPacket()
	p.SetLen(1)
	if s.Send(p, d) {
		t.Fatal("send after close accepted")
	}
	s.Close() // idempotent
}

// TestHoldSendsABurstAtOnce: packets sent while the socket is held wait,
// with the writer asleep, until the last Release; then the writer wakes
// once and sends them all in one sendmmsg call.
func TestHoldSendsABurstAtOnce(t *testing.T) {
	s := listen(t, true)
	rc := udp(t)
	d := NewDest(addrOf(rc), 100)
	w := s.writerFor(d)
	asleep := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.sleeping
	}
	testutil.WaitFor(t, 5*time.Second, "the writer asleep", asleep)
	s.Hold()
	s.Hold() // a second holder: holds nest
	const n = 10
	for i := range n {
		if !s.Send(packet("p"+strconv.Itoa(i)), d) {
			t.Fatal("send refused")
		}
	}
	s.Release()
	if !asleep() || w.pending() != n {
		t.Fatalf("one holder left: writer asleep %v, %d queued; want asleep with %d", asleep(), w.pending(), n)
	}
	s.Release()
	for i := range n {
		if got, want := string(recvOne(t, rc)), "p"+strconv.Itoa(i); got != want {
			t.Fatalf("datagram %d is %q, want %q", i, got, want)
		}
	}
	// asleep again: done with the burst, its calls counted
	testutil.WaitFor(t, 5*time.Second, "the writer asleep after the burst", asleep)
	if b := s.Stats().SendBatches; b != 1 {
		t.Fatalf("%d sendmmsg calls for the burst, want 1", b)
	}
	// Without a hold each packet still leaves on its own.
	s.Send(packet("after"), d)
	if got := string(recvOne(t, rc)); got != "after" {
		t.Fatalf("got %q", got)
	}
}
