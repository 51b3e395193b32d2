package sfu

import (
	"time"

	"github.com/pion/rtcp"
)

// The SFU sends its subscribers' sender reports itself, from what each
// downTrack's writer already knows, instead of through pion's report
// interceptor: that one is a layer of the send chain that takes a lock and
// reads the clock for every packet of every subscriber (4–5 % of the
// node's CPU at 800 audio subscribers), to note what write notes anyway.
// A browser needs the reports: they map the track's RTP timestamps to the
// wall clock (lip sync across a member's audio and video) and give it the
// round trip, and its receiver reports then give the node its own
// (downTrack.report).

// reportEvery is how often a subscriber connection reports each track it
// sends, as pion's interceptor did.
const reportEvery = time.Second

// reportsPerPacket bounds the sender reports in one compound RTCP packet:
// 28 bytes each, 40 of them under the 1,200 bytes WebRTC keeps to.
const reportsPerPacket = 40

// sent notes a packet of n payload octets with RTP timestamp ts sent at
// now: in order (not a retransmission, not late), its timestamp is the
// newest, and a new frame's first packet anchors the report's RTP time
// (later packets of a frame only left later). A retransmission counts
// only as a packet sent.
func (d *downTrack) sent(n int, ts uint32, now time.Time, inOrder bool) {
	d.srMu.Lock()
	d.srCount++
	d.srBytes += uint32(n)
	if inOrder && (ts != d.srTS || d.srAt.IsZero()) {
		d.srTS, d.srAt = ts, now
	}
	d.srMu.Unlock()
}

// senderReport is the track's sender report at now (RFC 3550 §6.4.1): the
// RTP time of now from the newest frame's timestamp and when it went, and
// the counts; nil before the track sent a packet (a source that sent
// nothing has no RTP time to report) or while it is not bound.
func (d *downTrack) senderReport(now time.Time) *rtcp.SenderReport {
	b := d.local.bound.Load()
	if b == nil {
		return nil
	}
	d.srMu.Lock()
	defer d.srMu.Unlock()
	if d.srAt.IsZero() {
		return nil
	}
	return &rtcp.SenderReport{
		SSRC:        b.ssrc,
		NTPTime:     ntpTime(now),
		RTPTime:     d.srTS + uint32(now.Sub(d.srAt).Seconds()*float64(d.clock)),
		PacketCount: d.srCount,
		OctetCount:  d.srBytes,
	}
}

// sendReports sends the sender reports of every track the peer's
// subscriber connection carries. Called by the room's tick.
func (p *Peer) sendReports(now time.Time) {
	pc := p.subPC.Load()
	if pc == nil {
		return
	}
	var pkts []rtcp.Packet
	for _, d := range p.downTracks() {
		if sr := d.senderReport(now); sr != nil {
			pkts = append(pkts, sr)
		}
	}
	for len(pkts) > 0 {
		n := min(len(pkts), reportsPerPacket)
		if err := pc.WriteRTCP(pkts[:n]); err != nil {
			return // not connected yet, or closing
		}
		pkts = pkts[n:]
	}
}

// ntpTime is t in NTP's 64-bit format: seconds since 1900 and a fraction.
func ntpTime(t time.Time) uint64 {
	const ntpEpochOffset = 2208988800
	s := uint64(t.Unix()) + ntpEpochOffset
	f := uint64(t.Nanosecond()) << 32 / 1e9
	return s<<32 | f
}
