package udpmux

import (
	"runtime"
	"strconv"
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
