package sfu

import (
	"sync"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
)

// rtcpSink collects what an interceptor writes.
type rtcpSink struct {
	mu  sync.Mutex
	got []rtcp.Packet
}

func (s *rtcpSink) Write(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, pkts...)
	return 0, nil
}

func (s *rtcpSink) packets() []rtcp.Packet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rtcp.Packet(nil), s.got...)
}

// TestFeedbackCoversBothPaths: the packets pion reads and those the direct
// path takes are acknowledged in one transport-wide feedback, and a packet
// missing from either is asked for with a NACK.
func TestFeedbackCoversBothPaths(t *testing.T) {
	x := &directPub{}
	i, err := feedbackFactory{x}.NewInterceptor("")
	if err != nil {
		t.Fatal(err)
	}
	defer i.Close()
	fb := x.fb.Load()
	if fb == nil {
		t.Fatal("the direct path was not given the feedback")
	}
	sink := &rtcpSink{}
	i.BindRTCPWriter(sink)
	const ssrc, twccID = 0x1234, 3
	info := &interceptor.StreamInfo{SSRC: ssrc, MimeType: "video/VP8",
		RTPHeaderExtensions: []interceptor.RTPHeaderExtension{{URI: sdp.TransportCCURI, ID: twccID}},
		RTCPFeedback:        []interceptor.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}}}
	packet := func(seq uint16) []byte {
		h := rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, SSRC: ssrc}
		if err := h.SetExtension(twccID, []byte{byte(seq >> 8), byte(seq)}); err != nil {
			t.Fatal(err)
		}
		b, err := (&rtp.Packet{Header: h, Payload: []byte{1, 2, 3}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Pion's chain reads 10 and 11; the direct path takes 12 and 14; 13
	// never comes.
	queue := [][]byte{packet(10), packet(11)}
	r := i.BindRemoteStream(info, interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		n := copy(b, queue[0])
		queue = queue[1:]
		return n, a, nil
	}))
	buf := make([]byte, 1500)
	for range 2 {
		if _, _, err := r.Read(buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint16{12, 14} {
		var h rtp.Header
		if _, err := h.Unmarshal(packet(seq)); err != nil {
			t.Fatal(err)
		}
		fb.seen(ssrc, &h, time.Now())
	}
	deadline := time.Now().Add(5 * time.Second)
	var acked, nacked map[uint16]bool
	for time.Now().Before(deadline) && (len(acked) < 4 || len(nacked) < 1) {
		time.Sleep(20 * time.Millisecond)
		acked, nacked = map[uint16]bool{}, map[uint16]bool{}
		for _, p := range sink.packets() {
			switch p := p.(type) {
			case *rtcp.TransportLayerCC:
				seq := p.BaseSequenceNumber
				for _, c := range p.PacketChunks {
					var symbols []uint16
					switch c := c.(type) {
					case *rtcp.RunLengthChunk:
						for range c.RunLength {
							symbols = append(symbols, c.PacketStatusSymbol)
						}
					case *rtcp.StatusVectorChunk:
						symbols = c.SymbolList
					}
					for _, s := range symbols {
						if s != rtcp.TypeTCCPacketNotReceived {
							acked[seq] = true
						}
						seq++
					}
				}
			case *rtcp.TransportLayerNack:
				if p.MediaSSRC != ssrc || p.SenderSSRC != fb.sender {
					t.Errorf("NACK for %x from %x", p.MediaSSRC, p.SenderSSRC)
				}
				for _, pair := range p.Nacks {
					for _, s := range pair.PacketList() {
						nacked[s] = true
					}
				}
			}
		}
	}
	for _, s := range []uint16{10, 11, 12, 14} {
		if !acked[s] {
			t.Errorf("transport-wide feedback does not acknowledge %d (acknowledged %v)", s, acked)
		}
	}
	if acked[13] {
		t.Error("13 acknowledged, never received")
	}
	if len(nacked) != 1 || !nacked[13] {
		t.Errorf("NACKed %v, want 13", nacked)
	}
	// An unbound stream is forgotten; a stream that asks for neither is
	// not wrapped.
	i.UnbindRemoteStream(info)
	if r2 := i.BindRemoteStream(&interceptor.StreamInfo{SSRC: 9, MimeType: "audio/opus"}, r); r2 == nil {
		t.Fatal("nil reader")
	}
	fb.mu.Lock()
	left := len(fb.streams)
	fb.mu.Unlock()
	if left != 0 {
		t.Errorf("%d streams left", left)
	}
}
