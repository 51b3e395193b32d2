package udpmux

import (
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/convene/convene/internal/media"
)

// BenchmarkFanOut sends one 252-byte packet to n subscribers through the
// socket's writer per op, with sendmmsg batches and with one sendto per
// datagram, so the two can be compared (ns/op is per packet, so divide by n
// for the cost per datagram). Receivers are bound but not read: the kernel
// drops what overflows their buffers, as it would for a slow client.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		for _, batch := range []bool{true, false} {
			b.Run("subs="+strconv.Itoa(n)+"/batch="+strconv.FormatBool(batch), func(b *testing.B) {
				s := listen(b, batch)
				dests := make([]*Dest, n)
				for i := range dests {
					dests[i] = NewDest(addrOf(udp(b)), 1<<20)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// Pace the producer to the writer, as a real publisher's
					// packet rate would be far below it.
					for s.ws[0].pending() > 4*maxBatch {
						runtime.Gosched()
					}
					p := media.NewPacket()
					p.SetLen(252)
					p.Retain(n - 1)
					for _, d := range dests {
						s.Send(p, d)
					}
				}
				last := dests[n-1]
				for last.Stats().Packets+last.Stats().Drops+last.Stats().Errors < uint64(b.N) {
					// wait for the writer to drain
				}
				b.StopTimer()
				var sent, dropped uint64
				for _, d := range dests {
					st := d.Stats()
					sent += st.Packets
					dropped += st.Drops
				}
				b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "sent/s")
				b.ReportMetric(float64(dropped)/float64(uint64(b.N*n)), "dropped/datagram")
			})
		}
	}
}

// BenchmarkRead: datagrams from one sender, in bursts of 32, through the
// socket's reader to a handler; ns/op is per datagram, the reader's and
// the sender's system calls together (both on this machine).
func BenchmarkRead(b *testing.B) {
	s := listen(b, false)
	sender := udp(b)
	var got atomic.Uint64
	if err := s.Register(addrOf(sender), handlerFunc(func(p *media.Packet, _ netip.AddrPort) {
		got.Add(1)
		p.Release()
	})); err != nil {
		b.Fatal(err)
	}
	to := s.Conn().LocalAddr()
	payload := make([]byte, 200)
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		n := min(32, b.N-sent)
		for range n {
			if _, err := sender.WriteTo(payload, to); err != nil {
				b.Fatal(err)
			}
		}
		sent += n
		for got.Load() < uint64(sent) { // 32 fit any receive buffer: none dropped
			runtime.Gosched()
		}
	}
}
