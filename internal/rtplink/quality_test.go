package rtplink

import (
	"strings"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// stepClock returns base + 10 ms, + 20 ms, … at each call.
func stepClock() func() time.Time {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	return func() time.Time {
		n++
		return base.Add(time.Duration(n) * 10 * time.Millisecond)
	}
}

// TestQualityFromReceiverReports, over real UDP: a sending endpoint's SR
// goes through the node to a receiving endpoint, which answers with an RR
// about that stream (25 % lost, 10 lost in all, jitter 800 at 8 kHz, LSR
// of that SR, DLSR 256/65536 s). The receiving link's quality shows the
// loss and jitter, and the round trip between node and endpoint as the
// RR's arrival − the SR's departure − DLSR, on the link's clock (10 ms
// between the two readings): 10 ms − 3.90625 ms.
func TestQualityFromReceiverReports(t *testing.T) {
	v := newEnv(t)
	s, r := newPairEndpoint(t, "sender"), newPairEndpoint(t, "receiver")
	v.open(t, s, Config{})
	m := NewMetrics()
	lr := v.open(t, r, Config{Now: stepClock(), Metrics: m})
	if q := lr.Stats().Quality; q != (Quality{}) {
		t.Fatalf("before any report: %+v", q)
	}

	ntp := uint64(0x1122334455667788)
	sr := rtcpBytes(t, &rtcp.SenderReport{SSRC: 0x5, NTPTime: ntp, RTPTime: 1000, PacketCount: 100, OctetCount: 16000})
	send(t, s.rtcp, v.socks.RTCP, sr)
	expect(t, r.rtcp, v.socks.RTCP, "the SR at the receiver", sr)

	report := rtcpBytes(t, &rtcp.ReceiverReport{SSRC: 0x9, Reports: []rtcp.ReceptionReport{{
		SSRC: 0x5, FractionLost: 64, TotalLost: 10, LastSequenceNumber: 200, Jitter: 800,
		LastSenderReport: uint32(ntp >> 16), Delay: 256}}})
	send(t, r.rtcp, v.socks.RTCP, report)
	expect(t, s.rtcp, v.socks.RTCP, "the RR at the sender", report)

	q := lr.Stats().Quality
	want := Quality{Reports: 1, Streams: 1, FractionLost: 0.25, CumulativeLost: 10, JitterSeconds: 0.1,
		RTTSeconds: (10*time.Millisecond - 3906250*time.Nanosecond).Seconds(), LastReport: q.LastReport}
	if q != want || q.LastReport.IsZero() {
		t.Errorf("quality %+v\nwant    %+v", q, want)
	}
	reg := prometheus.NewRegistry()
	m.Register(reg)
	wantMetrics := `
# HELP convene_rtplink_rtt_seconds Round trips between the node and plain RTP endpoints, from their reports' LSR and DLSR.
# TYPE convene_rtplink_rtt_seconds histogram
convene_rtplink_rtt_seconds_bucket{le="0.001"} 0
convene_rtplink_rtt_seconds_bucket{le="0.005"} 0
convene_rtplink_rtt_seconds_bucket{le="0.01"} 1
convene_rtplink_rtt_seconds_bucket{le="0.02"} 1
convene_rtplink_rtt_seconds_bucket{le="0.05"} 1
convene_rtplink_rtt_seconds_bucket{le="0.1"} 1
convene_rtplink_rtt_seconds_bucket{le="0.2"} 1
convene_rtplink_rtt_seconds_bucket{le="0.5"} 1
convene_rtplink_rtt_seconds_bucket{le="1"} 1
convene_rtplink_rtt_seconds_bucket{le="+Inf"} 1
convene_rtplink_rtt_seconds_sum 0.00609375
convene_rtplink_rtt_seconds_count 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(wantMetrics), "convene_rtplink_rtt_seconds"); err != nil {
		t.Error(err)
	}
	if n := promtest.CollectAndCount(m.lost); n != 1 {
		t.Errorf("%d fraction-lost series, want 1 (no per-link labels)", n)
	}
}

// TestQualityBlocks: reports about several streams keep the worst loss
// and jitter and sum the losses (negative when duplicates outnumber them);
// a report whose LSR names no SR sent leaves the RTT unknown; reports of
// more than 16 streams keep 16; SRs' report blocks count too; a packet
// that starts with neither SR nor RR is not parsed.
func TestQualityBlocks(t *testing.T) {
	q := quality{clock: 90000}
	at := time.Unix(100, 0)
	b := func(pkts ...rtcp.Packet) []byte { return rtcpBytes(t, pkts...) }
	q.received(b(&rtcp.ReceiverReport{SSRC: 1, Reports: []rtcp.ReceptionReport{
		{SSRC: 10, FractionLost: 26, TotalLost: 5, Jitter: 9000, LastSenderReport: 0x1234, Delay: 1},
		{SSRC: 11, FractionLost: 128, TotalLost: 0xffffff, Jitter: 900},
	}}), at)
	got := q.snapshot()
	if got.Streams != 2 || got.FractionLost != 0.5 || got.CumulativeLost != 4 || got.JitterSeconds != 0.1 || got.RTTSeconds != 0 {
		t.Errorf("two streams: %+v", got)
	}
	for i := range 20 {
		q.received(b(&rtcp.SenderReport{SSRC: 1, Reports: []rtcp.ReceptionReport{{SSRC: uint32(100 + i)}}}), at.Add(time.Duration(i+1)*time.Second))
	}
	if got := q.snapshot(); got.Streams != maxStreams || got.Reports != 22 || !got.LastReport.Equal(at.Add(20*time.Second)) {
		t.Errorf("after 22 blocks of 22 streams: %+v", got)
	}
	bye := b(&rtcp.Goodbye{Sources: []uint32{1}}, &rtcp.ReceiverReport{SSRC: 1, Reports: []rtcp.ReceptionReport{{SSRC: 7}}})
	q.received(bye, at)
	if got := q.snapshot(); got.Reports != 22 {
		t.Errorf("a compound packet starting with BYE was taken: %+v", got)
	}
}

// FuzzQuality: any datagram, as sent to the endpoint or received from
// it, leaves a Quality within its bounds.
func FuzzQuality(f *testing.F) {
	add := func(pkts ...rtcp.Packet) {
		b, err := rtcp.Marshal(pkts)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	add(&rtcp.SenderReport{SSRC: 5, NTPTime: 1 << 40, Reports: []rtcp.ReceptionReport{{SSRC: 6, LastSenderReport: 1 << 24, Delay: 1}}})
	add(&rtcp.ReceiverReport{SSRC: 6, Reports: []rtcp.ReceptionReport{{SSRC: 5, FractionLost: 255, TotalLost: 0x800000, Jitter: 1 << 31, LastSenderReport: 1 << 24, Delay: 0xffffffff}}})
	add(&rtcp.ReceiverReport{SSRC: 6}, &rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{Source: 6, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "x"}}}}})
	f.Fuzz(func(t *testing.T, b []byte) {
		q := quality{clock: 8000}
		now := time.Unix(1000, 0)
		q.noteSent(b, now)
		q.received(b, now.Add(time.Second))
		got := q.snapshot()
		if got.FractionLost < 0 || got.FractionLost >= 1 || got.Streams > maxStreams || got.RTTSeconds < 0 || got.RTTSeconds > 1 || got.JitterSeconds < 0 {
			t.Fatalf("quality out of bounds: %+v", got)
		}
	})
}

// BenchmarkQuality: what a link spends on the RTCP it forwards to its
// endpoint (an SR with SDES, noted) and on the RR it takes from it.
func BenchmarkQuality(b *testing.B) {
	sr, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.SenderReport{SSRC: 5, NTPTime: 1 << 40, PacketCount: 10},
		&rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{Source: 5, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "sender"}}}}}})
	rr, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.ReceiverReport{SSRC: 6, Reports: []rtcp.ReceptionReport{{SSRC: 5, FractionLost: 3, LastSenderReport: 1 << 24, Delay: 10}}}})
	now := time.Unix(1000, 0)
	b.Run("sent SR", func(b *testing.B) {
		q := quality{clock: 8000}
		b.ReportAllocs()
		for b.Loop() {
			q.noteSent(sr, now)
		}
	})
	b.Run("received RR", func(b *testing.B) {
		q := quality{clock: 8000}
		b.ReportAllocs()
		for b.Loop() {
			q.received(rr, now)
		}
	})
	b.Run("other RTCP", func(b *testing.B) {
		q := quality{clock: 8000}
		bye, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.Goodbye{Sources: []uint32{5}}})
		b.ReportAllocs()
		for b.Loop() {
			q.noteSent(bye, now)
		}
	})
}
