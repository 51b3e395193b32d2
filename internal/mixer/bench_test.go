package mixer

import (
	"encoding/binary"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

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
//
// The ticks run back to back, so each is stamped with the wall clock (as
// Deliver stamps the packets): a tick stamped 20 ms ahead of the last
// would outrun the packets' arrival times by 200 ms after ten ticks, find
// every input idle and measure a session with no speaker, one encoding of
// silence a tick instead of seven of speech (which is what this benchmark
// measured until it checked encodes/op).
func BenchmarkSession(b *testing.B) {
	for _, c := range []codec.Spec{codec.PCMU, codec.Opus} {
		b.Run(c.Name, func(b *testing.B) {
			r := broker.NewRoom("bench")
			mt := NewMetrics()
			m, err := newMixer("mixer:", "bench", "", r, &Options{Speakers: 6, Depth: 3, Metrics: mt})
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
			ticks := 0
			tick := func() {
				for i, s := range senders {
					pk := frames[i][ticks%50]
					stamp(pk, ticks, c)
					pk.Retain(1)
					s.t.Publish(pk)
				}
				m.tick(time.Now())
				ticks++
			}
			for range 50 {
				tick() // past the first ticks, while the speakers' loudness rises
			}
			encoded := promtest.ToFloat64(mt.frames)
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				tick()
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			checkShape(b, m, 6, (promtest.ToFloat64(mt.frames)-encoded)/float64(b.N))
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(frame.Seconds()/per, "sessions/core")
		})
	}
}

// cpuTime is the CPU the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkShape fails a benchmark whose session did not do the work it says:
// speakers speaking at the end and, a tick, an encoding for each of them
// and one of the full mix.
func checkShape(b *testing.B, m *Mixer, speakers int, encodes float64) {
	b.Helper()
	b.ReportMetric(encodes, "encodes/op")
	if len(m.speakers) != speakers || encodes < float64(speakers+1)-0.01 {
		b.Fatalf("%d speakers and %.2f encodes a tick: the benchmark measures an idle session", len(m.speakers), encodes)
	}
}

// BenchmarkSessions is the mixer benchmark's load (convene-bench mixer) in
// process: S sessions of 10 members, 6 speaking a tone whose loudness rises
// and falls four times a second (speakers 300 to 800 Hz, as mixbench
// records them), 4 that sent one frame of silence when they joined and
// nothing since; each member hears its mix. The sessions tick one after
// the other, as the node's mixers share a core, so each tick finds its
// coders' state where the other sessions left the caches. One op is one
// 20 ms frame of all S sessions; ms/session and cpu-ms/session are one
// session's share of it, in wall-clock time and in the process's CPU time
// (the node's measure in convene-bench; on a shared machine the wall clock
// counts other processes' turns too).
func BenchmarkSessions(b *testing.B) {
	for _, sessions := range []int{1, 12} {
		b.Run(fmt.Sprintf("opus/%d", sessions), func(b *testing.B) {
			c := codec.Opus
			voices := make([][]*media.Packet, 6)
			for k := range voices {
				voices[k] = speech(b, c, float64(300+100*k))
			}
			type session struct {
				m      *Mixer
				mt     *Metrics
				tracks []*broker.Track
			}
			var ss []session
			for s := range sessions {
				r := broker.NewRoom(fmt.Sprintf("bench%d", s))
				mt := NewMetrics()
				m, err := newMixer("mixer:", r.ID(), "", r, &Options{Speakers: 6, Depth: 3, Metrics: mt})
				if err != nil {
					b.Fatal(err)
				}
				close(m.stop) // the benchmark ticks by hand
				<-m.done
				se := session{m: m, mt: mt}
				for i := range 10 {
					owner := fmt.Sprintf("m%d", i)
					tr := join(b, r, "l"+owner, owner)
					m.add(&Output{ID: "l" + owner, Owner: owner, Codec: c, Sink: discard{}})
					if i < 6 {
						se.tracks = append(se.tracks, tr)
					} else {
						pk := silence(b, c)
						tr.Publish(pk) // a phone with silence suppression: one frame, then nothing
					}
				}
				ss = append(ss, se)
			}
			ticks := 0
			tick := func() {
				for _, se := range ss {
					for k, tr := range se.tracks {
						pk := voices[k][ticks%len(voices[k])]
						stamp(pk, ticks+1, c)
						pk.Retain(1)
						tr.Publish(pk)
					}
					se.m.tick(time.Now())
				}
				ticks++
			}
			for range 50 {
				tick()
			}
			before := make([]float64, len(ss))
			for i, se := range ss {
				before[i] = promtest.ToFloat64(se.mt.frames)
			}
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				tick()
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N*sessions), "cpu-ms/session")
			for i, se := range ss {
				checkShape(b, se.m, 6, (promtest.ToFloat64(se.mt.frames)-before[i])/float64(b.N))
			}
			per := b.Elapsed().Seconds() / float64(b.N) / float64(sessions)
			b.ReportMetric(per*1000, "ms/session")
			b.ReportMetric(frame.Seconds()/per, "sessions/core")
		})
	}
}

// speech is a second of a freq Hz tone at about -16 dBFS at its peak, its
// loudness rising and falling four times a second, in 20 ms RTP packets
// of c, encoded once (as mixbench's speakers send it).
func speech(b *testing.B, c codec.Spec, freq float64) []*media.Packet {
	enc, err := codec.NewEncoder(c)
	if err != nil {
		b.Fatal(err)
	}
	n := c.FrameSamples()
	pcm := make([]int16, n)
	var pks []*media.Packet
	for f := range 50 {
		for i := range pcm {
			t := float64(f*n+i) / float64(c.Rate)
			env := 0.55 + 0.45*math.Sin(2*math.Pi*4*t)
			pcm[i] = int16(5200 * env * math.Sin(2*math.Pi*freq*t))
		}
		pks = append(pks, rtpPacket(b, enc, c, uint16(f), uint32(f*n), pcm))
	}
	return pks
}

// silence is one 20 ms RTP packet of silence in c.
func silence(b *testing.B, c codec.Spec) *media.Packet {
	enc, err := codec.NewEncoder(c)
	if err != nil {
		b.Fatal(err)
	}
	return rtpPacket(b, enc, c, 0, 0, make([]int16, c.FrameSamples()))
}

func rtpPacket(b *testing.B, enc codec.Encoder, c codec.Spec, seq uint16, ts uint32, pcm []int16) *media.Packet {
	pk := media.NewPacket()
	buf := pk.Buffer()
	buf[0], buf[1] = 0x80, c.PT
	binary.BigEndian.PutUint16(buf[2:], seq)
	binary.BigEndian.PutUint32(buf[4:], ts)
	binary.BigEndian.PutUint32(buf[8:], 1234)
	k, err := enc.Encode(pcm, buf[12:])
	if err != nil {
		b.Fatal(err)
	}
	pk.SetLen(12 + k)
	return pk
}

// stamp gives a packet replayed from a loop the sequence number and
// timestamp of frame n of its stream, so the loop has no seam.
func stamp(pk *media.Packet, n int, c codec.Spec) {
	buf := pk.Buffer()
	binary.BigEndian.PutUint16(buf[2:], uint16(n))
	binary.BigEndian.PutUint32(buf[4:], uint32(n*c.FrameTicks()))
}
