package codec

import (
	"math"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU the process has used: on a shared machine the time
// per op counts other processes' turns too, and cpu-µs/op does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64((cpuTime()-since).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// voices is a second of the mixer benchmark's mix: the tones of n speakers
// (300, 400, … Hz), each about -16 dBFS at its peak with its loudness
// rising and falling four times a second, in 20 ms frames at 48 kHz.
func voices(n int) [][]int16 {
	const rate, size = 48000, 960
	frames := make([][]int16, 50)
	for f := range frames {
		frames[f] = make([]int16, size)
		for i := range size {
			t := float64(f*size+i) / rate
			env := 0.55 + 0.45*math.Sin(2*math.Pi*4*t)
			var v float64
			for k := range n {
				v += 5200 * env * math.Sin(2*math.Pi*float64(300+100*k)*t)
			}
			frames[f][i] = int16(max(math.MinInt16, min(math.MaxInt16, v)))
		}
	}
	return frames
}

// BenchmarkOpus is one 20 ms frame of the mixer's Opus with the node's
// encoder settings (32 kbit/s, complexity 5, in-band FEC for 5% loss): an
// encoding of a five-speaker mix-minus, and a decoding of one speaker's
// packet. A mixing session of 6 speakers and 4 listeners costs 7
// encodings and 6 decodings a frame; AudioBridge's, 10 and 6.
func BenchmarkOpus(b *testing.B) {
	b.Run("encode", func(b *testing.B) {
		enc, err := NewEncoder(Opus)
		if err != nil {
			b.Fatal(err)
		}
		frames := voices(5)
		out := make([]byte, 1500)
		b.ResetTimer()
		cpu := cpuTime()
		for n := range b.N {
			if _, err := enc.Encode(frames[n%len(frames)], out); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("decode", func(b *testing.B) {
		enc, err := NewEncoder(Opus)
		if err != nil {
			b.Fatal(err)
		}
		var packets [][]byte
		for _, f := range voices(1) {
			out := make([]byte, 1500)
			k, err := enc.Encode(f, out)
			if err != nil {
				b.Fatal(err)
			}
			packets = append(packets, out[:k])
		}
		dec, err := NewDecoder(Opus)
		if err != nil {
			b.Fatal(err)
		}
		pcm := make([]int16, 6*960)
		b.ResetTimer()
		cpu := cpuTime()
		for n := range b.N {
			if k, err := dec.Decode(packets[n%len(packets)], pcm); err != nil || k != 960 {
				b.Fatalf("decoded %d samples: %v", k, err)
			}
		}
		reportCPU(b, cpu)
	})
}
