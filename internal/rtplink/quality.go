package rtplink

import (
	"sync"
	"time"

	"github.com/pion/rtcp"
)

// Link quality from the endpoint's receiver reports (issue 16, link
// monitoring). A plain endpoint reports on the streams the node sends it
// in the report blocks of its RR or SR (RFC 3550 section 6.4.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
//	|                 SSRC_1 (SSRC of first source)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| fraction lost |       cumulative number of packets lost       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           extended highest sequence number received           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      interarrival jitter                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         last SR (LSR)                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   delay since last SR (DLSR)                  |
//	+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
//
// The node sends no sender reports of its own on plain links: it forwards
// the senders' (byte for byte, same SSRC). LSR is the middle 32 bits of
// the NTP time in the last SR the endpoint received from a source, so the
// link notes when it sent each SR to the endpoint (by SSRC and those 32
// bits) and takes the round trip between node and endpoint as the
// report's arrival − that SR's departure − DLSR (section 6.4.1's
// A − LSR − DLSR, with the node's own clock for both times). Where no
// sender in the room sends SRs (a browser's track reaches plain links
// without any), LSR stays 0 and RTT is unknown.

const (
	// maxStreams bounds the streams a link keeps reports of; a report
	// about another replaces the one heard of longest ago.
	maxStreams = 16
	// sentSRs is how many SRs sent to the endpoint the link remembers.
	sentSRs = 32
)

// Quality is what the endpoint's receiver reports say of the streams the
// node sends it, all zero until the first report.
type Quality struct {
	// Reports counts the report blocks taken; Streams how many streams
	// (SSRCs) they were about, 16 at most.
	Reports uint64 `json:"reports"`
	Streams int    `json:"streams"`
	// FractionLost is the worst stream's fraction lost in its last
	// report (0–1, over that report's interval); CumulativeLost the
	// streams' cumulative counts summed.
	FractionLost   float64 `json:"fraction_lost"`
	CumulativeLost int64   `json:"cumulative_lost"`
	// JitterSeconds is the worst stream's interarrival jitter, by the
	// link's clock rate (its codec's, else 8 kHz audio, 90 kHz video).
	JitterSeconds float64 `json:"jitter_seconds"`
	// RTTSeconds is the smoothed round trip between node and endpoint
	// (gain 1/8); 0 while unknown.
	RTTSeconds float64 `json:"rtt_seconds"`
	// LastReport is when the last report block arrived.
	LastReport time.Time `json:"last_report,omitzero"`
}

type streamReport struct {
	ssrc     uint32
	fraction uint8
	lost     uint32 // 24-bit signed on the wire
	jitter   uint32
	at       time.Time
}

type sentSR struct {
	ssrc, ntp uint32 // ntp: the middle 32 bits, as LSR names it
	at        time.Time
}

// quality keeps a link's reports. Its methods take the raw compound
// packet; the caller keeps the buffer (it is parsed, not kept).
type quality struct {
	clock float64  // the streams' RTP clock rate, for jitter in seconds
	m     *Metrics // nil: none

	mu      sync.Mutex
	reports uint64
	streams []streamReport
	sent    [sentSRs]sentSR
	next    int // sent's slot to fill next
	rtt     time.Duration
}

// parse returns the packets of compound packet b when its first packet is
// an SR (or, with rr, an RR): a compound packet with a report in it
// starts with one (RFC 3550 section 6.1), so nothing else is parsed.
func parse(b []byte, rr bool) []rtcp.Packet {
	if len(b) < 8 || (b[1] != uint8(rtcp.TypeSenderReport) && (!rr || b[1] != uint8(rtcp.TypeReceiverReport))) {
		return nil
	}
	pkts, err := rtcp.Unmarshal(b)
	if err != nil {
		return nil
	}
	return pkts
}

// noteSent notes the sender reports in a compound packet sent to the
// endpoint at now.
func (q *quality) noteSent(b []byte, now time.Time) {
	pkts := parse(b, false)
	if pkts == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range pkts {
		if sr, ok := p.(*rtcp.SenderReport); ok {
			q.sent[q.next] = sentSR{ssrc: sr.SSRC, ntp: uint32(sr.NTPTime >> 16), at: now}
			q.next = (q.next + 1) % sentSRs
		}
	}
}

// received takes the report blocks of a compound packet the endpoint sent,
// arrived at now.
func (q *quality) received(b []byte, now time.Time) {
	pkts := parse(b, true)
	if pkts == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range pkts {
		var blocks []rtcp.ReceptionReport
		switch r := p.(type) {
		case *rtcp.ReceiverReport:
			blocks = r.Reports
		case *rtcp.SenderReport:
			blocks = r.Reports
		}
		for _, rb := range blocks {
			q.take(rb, now)
		}
	}
}

// take records one report block. q.mu is held.
func (q *quality) take(rb rtcp.ReceptionReport, now time.Time) {
	q.reports++
	if q.m != nil {
		q.m.lost.Observe(float64(rb.FractionLost) / 256)
		q.m.jitter.Observe(float64(rb.Jitter) / q.clock)
	}
	sr := streamReport{ssrc: rb.SSRC, fraction: rb.FractionLost, lost: rb.TotalLost, jitter: rb.Jitter, at: now}
	i := q.stream(rb.SSRC)
	switch {
	case i >= 0:
		q.streams[i] = sr
	case len(q.streams) < maxStreams:
		q.streams = append(q.streams, sr)
	default:
		oldest := 0
		for j := range q.streams {
			if q.streams[j].at.Before(q.streams[oldest].at) {
				oldest = j
			}
		}
		q.streams[oldest] = sr
	}
	if rb.LastSenderReport == 0 {
		return
	}
	for _, s := range q.sent {
		if s.at.IsZero() || s.ssrc != rb.SSRC || s.ntp != rb.LastSenderReport {
			continue
		}
		// DLSR is in units of 1/65536 s.
		dlsr := time.Duration(uint64(rb.Delay) * uint64(time.Second) >> 16)
		rtt := now.Sub(s.at) - dlsr
		if rtt <= 0 { // a DLSR longer than the time since we sent it: not ours
			return
		}
		if q.m != nil {
			q.m.rtt.Observe(rtt.Seconds())
		}
		if q.rtt == 0 {
			q.rtt = rtt
		} else {
			q.rtt += (rtt - q.rtt) / 8
		}
		return
	}
}

func (q *quality) stream(ssrc uint32) int {
	for i := range q.streams {
		if q.streams[i].ssrc == ssrc {
			return i
		}
	}
	return -1
}

// lost24 is the 24-bit two's complement cumulative loss as a number (it
// goes negative when duplicates outnumber losses).
func lost24(v uint32) int64 {
	v &= 0xffffff
	if v&0x800000 != 0 {
		return int64(v) - 1<<24
	}
	return int64(v)
}

// snapshot returns the link's Quality now.
func (q *quality) snapshot() Quality {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := Quality{Reports: q.reports, Streams: len(q.streams), RTTSeconds: q.rtt.Seconds()}
	for _, s := range q.streams {
		out.FractionLost = max(out.FractionLost, float64(s.fraction)/256)
		out.CumulativeLost += lost24(s.lost)
		if q.clock > 0 {
			out.JitterSeconds = max(out.JitterSeconds, float64(s.jitter)/q.clock)
		}
		if s.at.After(out.LastReport) {
			out.LastReport = s.at
		}
	}
	return out
}
