package sfu

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

var (
	testKey  = bytes.Repeat([]byte{7}, 16)
	testSalt = bytes.Repeat([]byte{9}, 14)
	testFrom = netip.MustParseAddrPort("127.0.0.1:5004")
)

const testSSRC = 0x11223344

// capture is a broker sink that keeps what it is given.
type capture struct{ got [][]byte }

func (c *capture) Deliver(p *media.Packet, _ *broker.Track) {
	c.got = append(c.got, append([]byte(nil), p.Bytes()...))
	p.Release()
}

// directFixture is a direct path with one audio track that went direct,
// whose packets reach sink; enc encrypts as its publisher does.
func directFixture(t testing.TB) (in *directIn, enc *srtp.Context, sink *capture) {
	t.Helper()
	room := broker.New().Open("s")
	tr, err := room.Join(broker.Member{ID: "mic", Owner: "ada", Kind: media.Audio, Sends: true, Info: broker.TrackInfo{Codec: "audio/opus", ClockRate: 48000}})
	if err != nil {
		t.Fatal(err)
	}
	sink = &capture{}
	if _, err := room.Join(broker.Member{ID: "ear", Owner: "bob", Kind: media.Audio, Receives: true, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	dec, err := srtp.CreateContext(testKey, testSalt, srtp.ProtectionProfileAes128CmHmacSha1_80, srtp.SRTPReplayProtection(64))
	if err != nil {
		t.Fatal(err)
	}
	enc, err = srtp.CreateContext(testKey, testSalt, srtp.ProtectionProfileAes128CmHmacSha1_80)
	if err != nil {
		t.Fatal(err)
	}
	in = newDirectIn()
	x := &directPub{in: in, ctx: dec, started: true, tracks: map[uint32]*directTrack{testSSRC: {u: &upTrack{track: tr, kind: media.Audio, clock: 48000}}}}
	in.file(x, testFrom)
	return in, enc, sink
}

func sealed(t testing.TB, enc *srtp.Context, seq uint16, payload []byte) ([]byte, []byte) {
	t.Helper()
	plain, err := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: seq, Timestamp: uint32(seq) * 960, SSRC: testSSRC}, Payload: payload}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := enc.EncryptRTP(nil, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out, plain
}

func TestDirectInTakesItsTracksPackets(t *testing.T) {
	in, enc, sink := directFixture(t)
	pkt, plain := sealed(t, enc, 65535, []byte("hello, room"))
	if !in.take(pkt, testFrom) {
		t.Fatal("the track's packet was not taken")
	}
	if len(sink.got) != 1 || !bytes.Equal(sink.got[0], plain) {
		t.Fatalf("published %x, want %x", sink.got, plain)
	}
	// The next wraps the sequence number: the context follows.
	pkt2, plain2 := sealed(t, enc, 0, []byte("after the wrap"))
	if !in.take(pkt2, testFrom) || len(sink.got) != 2 || !bytes.Equal(sink.got[1], plain2) {
		t.Fatalf("after the wrap: %d published", len(sink.got))
	}
	// A replay is dropped, not published and not handed on.
	if !in.take(pkt2, testFrom) || len(sink.got) != 2 || in.refused.Load() != 1 {
		t.Fatalf("a replay: %d published, %d refused", len(sink.got), in.refused.Load())
	}
	// From elsewhere, of another SSRC, RTCP, or forged: pion's.
	pkt3, _ := sealed(t, enc, 1, []byte("x"))
	forged := append([]byte(nil), pkt3...)
	forged[len(forged)-1] ^= 1
	other := append([]byte(nil), pkt3...)
	other[11] ^= 1
	rtcpish := append([]byte(nil), pkt3...)
	rtcpish[1] = 200
	for name, c := range map[string]struct {
		b    []byte
		from netip.AddrPort
	}{
		"another address": {pkt3, netip.MustParseAddrPort("127.0.0.1:5006")},
		"another SSRC":    {other, testFrom},
		"RTCP":            {rtcpish, testFrom},
		"a forged tag":    {forged, testFrom},
		"STUN":            {[]byte{0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, testFrom},
	} {
		if in.take(c.b, c.from) {
			t.Errorf("%s: taken", name)
		}
	}
	if len(sink.got) != 2 || in.audio.Load() != 2 {
		t.Fatalf("published %d, counted %d", len(sink.got), in.audio.Load())
	}
	// Filed under none, the connection's packets are pion's again.
	for x := range in.all {
		x.close()
	}
	if in.take(pkt3, testFrom) {
		t.Fatal("taken after close")
	}
}

// FuzzDirectIn: whatever datagram comes from a publisher's address, the
// direct path never panics, and publishes only what the publisher's keys
// sealed.
func FuzzDirectIn(f *testing.F) {
	_, enc, _ := directFixture(f)
	for i, p := range [][]byte{[]byte("a"), bytes.Repeat([]byte{0xaa}, 160), {}} {
		pkt, _ := sealed(f, enc, uint16(100+i), p)
		f.Add(pkt)
		f.Add(pkt[:len(pkt)-3])
	}
	f.Add([]byte{0x80, 111, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		in, _, sink := directFixture(t)
		check, err := srtp.CreateContext(testKey, testSalt, srtp.ProtectionProfileAes128CmHmacSha1_80)
		if err != nil {
			t.Fatal(err)
		}
		in.take(append([]byte(nil), b...), testFrom)
		for _, got := range sink.got {
			if _, err := check.DecryptRTP(nil, b, nil); err != nil {
				t.Fatalf("published %x from a datagram the keys do not open: %v", got, err)
			}
		}
	})
}
