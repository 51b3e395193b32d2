package loadgen

import "time"

// Warmup is the number of packets at the start of each stream that are not
// counted, as in the seed.
const Warmup = 100

// Late is the latency above which a packet counts as late (and as lost).
const Late = 100 * time.Millisecond

// Listener is what one receiver measured. Only its own goroutine writes it.
type Listener struct {
	Meeting int
	Kind    Kind
	Index   int // subscription order within the meeting

	Received   uint64 // counted packets (index >= Warmup), late ones included
	LateCount  uint64
	Bytes      uint64
	LatencySum time.Duration
	LatencyMax time.Duration
	Foreign    uint64 // packets of another meeting or not load packets
	// Unstamped counts packets that came without a kernel receive
	// timestamp, whose latency was taken when this process read them.
	Unstamped uint64

	jitter      float64 // RFC 3550 §6.4.1, in ns
	prevTransit int64
	havePrev    bool
}

// Observe records a packet received at recvNs (same clock as SendNs).
func (l *Listener) Observe(p Packet, size int, recvNs int64) {
	if int(p.Meeting) != l.Meeting {
		l.Foreign++
		return
	}
	if p.Index < Warmup {
		return
	}
	transit := recvNs - p.SendNs
	// J(i) = J(i-1) + (|D(i-1,i)| - J(i-1))/16, with D the difference of
	// transit times (RFC 3550 §6.4.1; A.8 for the integer form).
	if l.havePrev {
		d := transit - l.prevTransit
		if d < 0 {
			d = -d
		}
		l.jitter += (float64(d) - l.jitter) / 16
	}
	l.prevTransit, l.havePrev = transit, true
	lat := time.Duration(transit)
	l.Received++
	l.Bytes += uint64(size)
	l.LatencySum += lat
	l.LatencyMax = max(l.LatencyMax, lat)
	if lat > Late {
		l.LateCount++
	}
}

// Jitter returns the RFC 3550 interarrival jitter.
func (l *Listener) Jitter() time.Duration { return time.Duration(l.jitter) }

// AvgLatency returns the mean latency of the counted packets.
func (l *Listener) AvgLatency() time.Duration {
	if l.Received == 0 {
		return 0
	}
	return l.LatencySum / time.Duration(l.Received)
}

// Lost returns how many of the counted packets that were sent never
// arrived; sent is the number the speaker sent with index >= Warmup.
func (l *Listener) Lost(sent uint64) uint64 {
	if l.Received >= sent {
		return 0
	}
	return sent - l.Received
}
