package sfu

import (
	"time"

	"github.com/pion/rtcp"
)

// recvStats is what a receiver counts of one RTP stream, for its loss and
// its reception reports (RFC 3550 §6.4.1, appendix A.1, A.3, A.8).
type recvStats struct {
	started  bool
	t0       time.Time // the first packet's arrival: the clock of transit times
	cycles   uint32    // wraps of the sequence number, shifted left 16
	highest  uint16
	base     uint32 // extended first sequence number
	received uint64
	jitter   float64 // in timestamp units
	transit  int64
	// Marks of the last report's and the last windowLoss's counts.
	repExpected, repReceived uint64
	winExpected, winReceived uint64
}

// add counts a packet that arrived at now; clock is the stream's RTP clock
// rate (0: no jitter).
func (r *recvStats) add(seq uint16, ts uint32, now time.Time, clock uint32) {
	if !r.started {
		r.started, r.t0, r.base, r.highest = true, now, uint32(seq), seq
	} else if d := seq - r.highest; d != 0 && d < 0x8000 {
		if seq < r.highest {
			r.cycles += 1 << 16
		}
		r.highest = seq
	}
	r.received++
	if clock == 0 {
		return
	}
	arrival := int64(now.Sub(r.t0)) * int64(clock) / int64(time.Second)
	transit := arrival - int64(ts)
	if r.received > 1 {
		d := transit - r.transit
		if d < 0 {
			d = -d
		}
		r.jitter += (float64(d) - r.jitter) / 16
	}
	r.transit = transit
}

// extHighest is the extended highest sequence number received.
func (r *recvStats) extHighest() uint32 { return r.cycles | uint32(r.highest) }

// expected is how many packets were sent, from the sequence numbers.
func (r *recvStats) expected() uint64 {
	if !r.started {
		return 0
	}
	return uint64(r.extHighest()-r.base) + 1
}

// lost is expected less received, never below zero (duplicates).
func (r *recvStats) lost() uint64 {
	if e := r.expected(); e > r.received {
		return e - r.received
	}
	return 0
}

// rocFor is the SRTP rollover count of a packet with sequence number seq
// arriving after those counted: the wraps so far, one more if seq is past
// a wrap the counted packets have not made.
func (r *recvStats) rocFor(seq uint16) uint32 {
	roc := r.cycles >> 16
	if r.started && seq < r.highest && r.highest-seq > 0x8000 {
		roc++
	}
	return roc
}

// windowLoss is the fraction lost since its last call.
func (r *recvStats) windowLoss() float64 {
	e, n := r.expected(), r.received
	de, dn := e-r.winExpected, n-r.winReceived
	r.winExpected, r.winReceived = e, n
	if de == 0 || dn >= de {
		return 0
	}
	return float64(de-dn) / float64(de)
}

// report fills a reception report's counts (not LSR and DLSR, the sender
// report's, which the caller keeps) and starts a new interval.
func (r *recvStats) report(rr *rtcp.ReceptionReport) {
	e, n := r.expected(), r.received
	de, dn := e-r.repExpected, n-r.repReceived
	r.repExpected, r.repReceived = e, n
	rr.FractionLost = 0
	if de > 0 && dn < de {
		rr.FractionLost = uint8((de - dn) * 256 / de)
	}
	rr.TotalLost = uint32(min(r.lost(), 0x7fffff))
	rr.LastSequenceNumber = r.extHighest()
	rr.Jitter = uint32(r.jitter)
}
