package multicast

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// rtpPacket marshals an RTP packet with pion/rtp, with optional CSRCs and a
// one-byte-header extension (RFC 8285) carrying ext as element 1.
func rtpPacket(pt uint8, marker bool, seq uint16, ts, ssrc uint32, csrc []uint32, ext, payload []byte) []byte {
	p := rtp.Packet{
		Header: rtp.Header{
			Version:        2,
			Marker:         marker,
			PayloadType:    pt,
			SequenceNumber: seq,
			Timestamp:      ts,
			SSRC:           ssrc,
			CSRC:           csrc,
		},
		Payload: payload,
	}
	if ext != nil {
		p.Header.Extension = true
		p.Header.ExtensionProfile = rtp.ExtensionProfileOneByte
		if err := p.Header.SetExtension(1, ext); err != nil {
			panic(err)
		}
	}
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

// rtcpRR marshals a compound RTCP packet with pion/rtcp: an empty receiver
// report and an SDES chunk with a CNAME (RFC 3550 §6.4.2, §6.5).
func rtcpRR(ssrc uint32, cname string) []byte {
	b, err := rtcp.Marshal([]rtcp.Packet{
		&rtcp.ReceiverReport{SSRC: ssrc},
		&rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{
			Source: ssrc,
			Items:  []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: cname}},
		}}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func ssrcOf(rtp []byte) uint32 { return binary.BigEndian.Uint32(rtp[8:12]) }

// recorder is a broker sink that keeps copies of what it is handed.
type recorder struct {
	mu   sync.Mutex
	got  [][]byte
	from []string // publishing member, "" for RTCP
}

func (r *recorder) Deliver(p *media.Packet, t *broker.Track) {
	r.mu.Lock()
	r.got = append(r.got, bytes.Clone(p.Bytes()))
	if t != nil {
		r.from = append(r.from, t.Publisher())
	} else {
		r.from = append(r.from, "")
	}
	r.mu.Unlock()
	p.Release()
}

// snapshot returns the packets received from the given publisher.
func (r *recorder) snapshot(from string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for i, b := range r.got {
		if r.from[i] == from {
			out = append(out, b)
		}
	}
	return out
}

// waitFor polls cond until it holds or the timeout passes.
func equalPackets(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: packet %d differs:\n got % x\nwant % x", what, i, got[i], want[i])
		}
	}
}
