package node

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/pion/rtcp"

	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/testutil"
)

// TestLinkSummary: the heartbeat counts the links that reported within
// 30 s, names the lossy ones (over 5 %) lossiest first, and has the
// largest jitter; nothing when none reported lately.
func TestLinkSummary(t *testing.T) {
	now := time.Unix(1000, 0)
	qs := map[string]rtplink.Quality{
		"fine":  {FractionLost: 0.01, JitterSeconds: 0.03, LastReport: now.Add(-time.Second)},
		"bad":   {FractionLost: 0.25, JitterSeconds: 0.01, LastReport: now},
		"worse": {FractionLost: 0.5, LastReport: now},
		"old":   {FractionLost: 0.9, JitterSeconds: 1, LastReport: now.Add(-time.Minute)},
	}
	got := linkSummary(qs, now)
	if got == nil || got.Reporting != 3 || got.Lossy != 2 || !slices.Equal(got.Lossiest, []string{"worse", "bad"}) || got.MaxJitterSeconds != 0.03 {
		t.Errorf("summary %+v", got)
	}
	if got := linkSummary(map[string]rtplink.Quality{"old": qs["old"]}, now); got != nil {
		t.Errorf("only an old report: %+v, want none", got)
	}
}

// TestLinkQualityOnNode: two plain RTP endpoints on a node; the sender's
// SR reaches the receiver, which answers with an RR saying a quarter of
// that stream was lost. The receiver's link shows it in its stats (with
// the round trip measured against the SR's departure), /metrics counts
// the report in its histogram, and the node's heartbeat names the link
// as lossy.
func TestLinkQualityOnNode(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "quality")
	a, b := udpConn(t), udpConn(t)
	la := addLink(t, n, s.ID, map[string]any{"remote": a.LocalAddr().String(), "kind": "audio", "rtcp_mux": true})
	lb := addLink(t, n, s.ID, map[string]any{"remote": b.LocalAddr().String(), "kind": "audio", "rtcp_mux": true})
	to := func(l linkJSON) *net.UDPAddr {
		return &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
	}

	ntp := uint64(0xaabbccdd11223344)
	sr, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.SenderReport{SSRC: 0x77, NTPTime: ntp, RTPTime: 160, PacketCount: 1, OctetCount: 160}})
	a.WriteToUDP(sr, to(la))
	if got := readRTP(b, 200*time.Millisecond, 5*time.Second); len(got) != 1 {
		t.Fatalf("the receiver got %d datagrams, want the SR", len(got))
	}
	report, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.ReceiverReport{SSRC: 0x88, Reports: []rtcp.ReceptionReport{{
		SSRC: 0x77, FractionLost: 64, TotalLost: 3, Jitter: 80, LastSenderReport: uint32(ntp >> 16)}}}})
	b.WriteToUDP(report, to(lb))

	type quality struct {
		Reports        uint64  `json:"reports"`
		FractionLost   float64 `json:"fraction_lost"`
		CumulativeLost int64   `json:"cumulative_lost"`
		JitterSeconds  float64 `json:"jitter_seconds"`
		RTTSeconds     float64 `json:"rtt_seconds"`
	}
	testutil.WaitUntil(t, 10*time.Second, func() string {
		var got struct {
			Links []struct {
				ID    string `json:"id"`
				Stats struct {
					Quality *quality `json:"quality"`
				} `json:"stats"`
			} `json:"links"`
		}
		if code := call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 {
			return fmt.Sprintf("GET session: %d", code)
		}
		for _, l := range got.Links {
			q := l.Stats.Quality
			switch {
			case l.ID == la.ID && q != nil:
				return fmt.Sprintf("the sender's link has a quality without reports: %+v", q)
			case l.ID == lb.ID && (q == nil || q.Reports != 1 || q.FractionLost != 0.25 || q.CumulativeLost != 3 || q.JitterSeconds != 0.01 || q.RTTSeconds <= 0):
				return fmt.Sprintf("the receiver's link quality: %+v", q)
			}
		}
		return ""
	})
	if v := metricValue(t, n, `convene_rtplink_report_fraction_lost_count`); v != 1 {
		t.Errorf("convene_rtplink_report_fraction_lost_count = %v, want 1", v)
	}
	if v := metricValue(t, n, `convene_rtplink_rtt_seconds_count`); v != 1 {
		t.Errorf("convene_rtplink_rtt_seconds_count = %v, want 1", v)
	}
	testutil.WaitUntil(t, 30*time.Second, func() string {
		var got struct {
			Nodes []struct {
				ID        string `json:"id"`
				Heartbeat struct {
					RTPLinks *struct {
						Reporting int      `json:"reporting"`
						Lossy     int      `json:"lossy"`
						Lossiest  []string `json:"lossiest"`
					} `json:"rtp_links"`
				} `json:"heartbeat"`
			}
		}
		call(t, "GET", n.URL()+"/api/v1/nodes", nil, &got)
		for _, e := range got.Nodes {
			if r := e.Heartbeat.RTPLinks; r != nil && r.Reporting == 1 && r.Lossy == 1 && slices.Equal(r.Lossiest, []string{lb.ID}) {
				return ""
			}
		}
		return fmt.Sprintf("no heartbeat names %s as lossy: %+v", lb.ID, got)
	})
}
