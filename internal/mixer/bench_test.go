package mixer

import (
	"fmt"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/media"
)

type discard struct{}

func (discard) Deliver(pk *media.Packet, _ *broker.Track) { pk.Release() }

// BenchmarkSession is one mixing session of 10 members, each sending a
// 20 ms frame and hearing the mix, 6 of them speaking: the work of one
// 20 ms tick with its inputs' decoding. 20 ms divided by the time per
// operation is how many such sessions one core mixes.
func BenchmarkSession(b *testing.B) {
	for _, c := range []codec.Spec{codec.PCMU, codec.Opus} {
		b.Run(c.Name, func(b *testing.B) {
			r := broker.NewRoom("bench")
			m, err := newMixer("mixer:", "bench", "", r, &Options{Speakers: 6, Depth: 3, Metrics: NewMetrics()})
			if err != nil {
				b.Fatal(err)
			}
			close(m.stop) // the benchmark ticks by hand
			<-m.done
			var senders []*sender
			var enc codec.Encoder
			if c.Name == "opus" {
				enc, _ = codec.NewEncoder(c)
			}
			for i := range 10 {
				owner := fmt.Sprintf("m%d", i)
				tr := join(b, r, "l"+owner, owner)
				amp := 6000.0
				if i >= 6 {
					amp = 0 // four listen
				}
				senders = append(senders, &sender{t: tr, freq: 300 + 100*float64(i), amp: amp, enc: enc, pt: c.PT})
				m.add(&Output{ID: "l" + owner, Owner: owner, Codec: c, Sink: discard{}})
			}
			// Pre-encode a second of each sender's packets so the benchmark
			// measures the node, not the senders.
			frames := make([][]*media.Packet, len(senders))
			for i, s := range senders {
				for range 50 {
					frames[i] = append(frames[i], s.packet())
				}
			}
			b.ResetTimer()
			now := time.Now()
			for n := range b.N {
				for i, s := range senders {
					pk := frames[i][n%50]
					pk.Retain(1)
					s.t.Publish(pk)
				}
				now = now.Add(frame)
				m.tick(now)
			}
			b.StopTimer()
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(frame.Seconds()/per, "sessions/core")
		})
	}
}
