package relay

import (
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkForward relays 172-byte packets (G.711, 20 ms) from one real UDP
// socket through the relay to another, with at most 256 in flight so that
// nothing is dropped; allocs/op counts every allocation in the process per
// relayed packet (sender and receiver use allocation-free socket calls).
func BenchmarkForward(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(map[int]string{1: "workers=1", 2: "workers=2"}[workers], func(b *testing.B) {
			// Spare Ps: the relay's workers and the receiver block in system
			// calls on their own threads, and one coming back must find a P
			// without waiting for sysmon to take one from the spinning sender.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers + 4))
			r := newTestRelay(b, func(o *Options) { o.Workers = workers })
			a, rx := newEndpoint(b), newEndpoint(b)
			if _, err := r.Offer("bench", "a", offerSDP(a.addr()), "", netip.Addr{}); err != nil {
				b.Fatal(err)
			}
			answer, err := r.Answer("bench", "a", "b", offerSDP(rx.addr()), netip.Addr{})
			if err != nil {
				b.Fatal(err)
			}
			toA := relayPort(b, answer)
			from := a.addr()
			a.conn.Close()
			tx, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(from), net.UDPAddrFromAddrPort(toA))
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			pkt := rtpPacket(1, make([]byte, 160))
			var got atomic.Int64
			done := make(chan struct{})
			// The receiver blocks in recvfrom on its own thread: the Go
			// netpoller would be polled only when a P idles, which a
			// spinning sender on two cores rarely lets happen.
			rxfd := rawBlockingUDP(b, rx)
			go func() {
				defer close(done)
				buf := make([]byte, 2048)
				for {
					n, err := unix.Read(rxfd, buf)
					if err != nil || n == 0 {
						return
					}
					got.Add(1)
				}
			}()
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			b.ResetTimer()
			// wait lets the relay catch up to within window packets; a
			// packet the kernel lost must not stall the benchmark.
			wait := func(i, window int) {
				var spins int
				last, since := got.Load(), time.Now()
				for int64(i)-got.Load() > int64(window) {
					runtime.Gosched()
					if spins++; spins%1024 == 0 {
						if g := got.Load(); g != last {
							last, since = g, time.Now()
						} else if time.Since(since) > 200*time.Millisecond {
							return
						}
					}
				}
			}
			for i := 0; i < b.N; i++ {
				wait(i, 64)
				if _, err := tx.Write(pkt); err != nil {
					b.Fatal(err)
				}
			}
			wait(b.N, 0)
			b.StopTimer()
			b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "pkts/s")
			if lost := int64(b.N) - got.Load(); lost > int64(b.N)/1000 {
				b.Errorf("%d of %d packets lost (relay drops: %v)", lost, b.N, r.Stats().Drops)
			}
			_ = unix.Shutdown(rxfd, unix.SHUT_RDWR)
			<-done
			unix.Close(rxfd)
		})
	}
}

// BenchmarkForwardBatch measures the per-packet work of the forwarding loop
// without the system calls: checking, latching and addressing a batch of 32
// datagrams read on one side. It must report 0 allocs/op.
func BenchmarkForwardBatch(b *testing.B) {
	r := newTestRelay(b, func(o *Options) { o.Workers = 1 })
	a, rx := newEndpoint(b), newEndpoint(b)
	if _, err := r.Offer("batch", "a", offerSDP(a.addr()), "", netip.Addr{}); err != nil {
		b.Fatal(err)
	}
	answer, err := r.Answer("batch", "a", "b", offerSDP(rx.addr()), netip.Addr{})
	if err != nil {
		b.Fatal(err)
	}
	s := r.socks[int(relayPort(b, answer).Port())-r.o.PortMin].Load()
	w, err := newWorker(r) // a private worker: its scratch is ours
	if err != nil {
		b.Fatal(err)
	}
	defer w.closeFDs()
	pkt := rtpPacket(1, make([]byte, 160))
	from := toRaw(a.addr())
	n := len(w.rmsgs)
	for i := 0; i < n; i++ {
		copy(w.bufs[i*bufSize:], pkt)
		w.rmsgs[i].Len = uint32(len(pkt))
		w.names[i] = from.b
		w.rmsgs[i].Hdr.Namelen = from.n
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		if k := w.forward(s, s.side, n); k != n {
			b.Fatalf("%d of %d forwarded: %v", k, n, w.drops)
		}
	}
	b.StopTimer()
}

// rawBlockingUDP replaces e's socket with a blocking one on the same address.
func rawBlockingUDP(b *testing.B, e *endpoint) int {
	ap := e.addr()
	e.conn.Close()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		b.Fatal(err)
	}
	return fd
}
