package media

import (
	"encoding/binary"
	"testing"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// marshalRTP builds an RTP packet with pion. Version 0 in h means 2.
func marshalRTP(t testing.TB, h rtp.Header, payload []byte) []byte {
	t.Helper()
	if h.Version == 0 {
		h.Version = 2
	}
	b, err := (&rtp.Packet{Header: h, Payload: payload}).Marshal()
	if err != nil {
		t.Fatalf("marshal RTP: %v", err)
	}
	return b
}

func marshalRTCP(t testing.TB, pkts ...rtcp.Packet) []byte {
	t.Helper()
	b, err := rtcp.Marshal(pkts)
	if err != nil {
		t.Fatalf("marshal RTCP: %v", err)
	}
	return b
}

func oneByteExt(t testing.TB, h rtp.Header) rtp.Header {
	t.Helper()
	if err := h.SetExtensionWithProfile(1, []byte{0xaa, 0xbb, 0xcc}, rtp.ExtensionProfileOneByte); err != nil {
		t.Fatal(err)
	}
	if err := h.SetExtension(3, []byte{0x01}); err != nil {
		t.Fatal(err)
	}
	return h
}

func twoByteExt(t testing.TB, h rtp.Header) rtp.Header {
	t.Helper()
	if err := h.SetExtensionWithProfile(7, make([]byte, 20), rtp.ExtensionProfileTwoByte); err != nil {
		t.Fatal(err)
	}
	return h
}

// withVersion returns a copy of b with the version bits set to v.
func withVersion(b []byte, v byte) []byte {
	b = append([]byte(nil), b...)
	b[0] = b[0]&0x3f | v<<6
	return b
}

func senderReport() *rtcp.SenderReport {
	return &rtcp.SenderReport{
		SSRC: 0x11223344, NTPTime: 0xdeadbeefcafebabe, RTPTime: 160, PacketCount: 10, OctetCount: 1600,
		Reports: []rtcp.ReceptionReport{{SSRC: 0x55667788, FractionLost: 3, TotalLost: 7, LastSequenceNumber: 99, Jitter: 12}},
	}
}

func sdes() *rtcp.SourceDescription {
	return &rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{
		Source: 0x11223344,
		Items:  []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "alice@convene"}},
	}}}
}

func receiverReport() *rtcp.ReceiverReport {
	return &rtcp.ReceiverReport{SSRC: 0x01020304, Reports: []rtcp.ReceptionReport{{SSRC: 0x11223344, LastSequenceNumber: 42}}}
}

func TestClassify(t *testing.T) {
	base := rtp.Header{PayloadType: 96, SequenceNumber: 1000, Timestamp: 90000, SSRC: 0xcafe}
	payload := []byte("0123456789abcdef")

	plain := marshalRTP(t, base, payload)
	csrc := base
	csrc.CSRC = []uint32{1, 2, 3}
	withCSRC := marshalRTP(t, csrc, payload)
	csrc15 := base
	csrc15.CSRC = make([]uint32, 15)
	with15CSRC := marshalRTP(t, csrc15, nil)
	withOneByte := marshalRTP(t, oneByteExt(t, base), payload)
	withTwoByte := marshalRTP(t, twoByteExt(t, base), payload)
	raw := base
	raw.Extension, raw.ExtensionProfile = true, 0x1234 // RFC 3550 extension: opaque words
	if err := raw.SetExtension(0, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	withRawExt := marshalRTP(t, raw, payload)
	pad := base
	pad.Padding, pad.PaddingSize = true, 4
	withPadding := marshalRTP(t, pad, payload)
	onlyPadding := marshalRTP(t, pad, nil)
	all := oneByteExt(t, csrc)
	all.Padding, all.PaddingSize, all.Marker = true, 7, true
	withAll := marshalRTP(t, all, payload)

	// Hand-damaged variants.
	padZero := append([]byte(nil), withPadding...)
	padZero[len(padZero)-1] = 0
	padTooLong := append([]byte(nil), withPadding...)
	padTooLong[len(padTooLong)-1] = byte(len(payload) + 5) // runs into the header
	padNoPayload := marshalRTP(t, base, nil)
	padNoPayload[0] |= 0x20 // padding bit, but the last octet is an SSRC octet (0xfe)
	extTooLong := append([]byte(nil), withOneByte...)
	binary.BigEndian.PutUint16(extTooLong[14:], 100) // extension claims 400 octets
	ccTooMany := append([]byte(nil), withCSRC...)
	ccTooMany[0] |= 0x0f // 15 CSRCs claimed, 3 present plus 16 octets of payload
	xNoExt := marshalRTP(t, base, nil)
	xNoExt[0] |= 0x10 // extension bit with nothing after the fixed header

	rtcpSR := marshalRTCP(t, senderReport())
	rtcpRR := marshalRTCP(t, receiverReport())
	compound := marshalRTCP(t, senderReport(), sdes())
	pt0 := base
	pt0.PayloadType = 0
	pcmu := marshalRTP(t, pt0, payload)
	marked := base
	marked.Marker = true // 0x80|96 = 224: just above the RTCP range
	marked96 := marshalRTP(t, marked, payload)
	pt72 := base
	pt72.PayloadType = 72 // without marker: 72, not in 192–223
	rtp72 := marshalRTP(t, pt72, payload)
	pt72.Marker = true // 0x80|72 = 200: looks like an SR on a muxed port
	rtp72m := marshalRTP(t, pt72, payload)

	tests := []struct {
		name string
		b    []byte
		mux  bool
		want Class
	}{
		{"plain", plain, false, ClassRTP},
		{"header only", plain[:12], false, ClassRTP},
		{"csrc", withCSRC, false, ClassRTP},
		{"15 csrc no payload", with15CSRC, false, ClassRTP},
		{"one-byte extension", withOneByte, false, ClassRTP},
		{"two-byte extension", withTwoByte, false, ClassRTP},
		{"rfc3550 extension", withRawExt, false, ClassRTP},
		{"padding", withPadding, false, ClassRTP},
		{"only padding", onlyPadding, false, ClassRTP},
		{"csrc+ext+padding+marker", withAll, false, ClassRTP},
		{"csrc+ext+padding muxed", withAll, true, ClassRTP},

		{"empty", nil, false, ClassTruncated},
		{"empty muxed", []byte{}, true, ClassTruncated},
		{"one octet", plain[:1], false, ClassTruncated},
		{"one octet muxed", plain[:1], true, ClassTruncated},
		{"11 octets", plain[:11], false, ClassTruncated},
		{"csrc cut", withCSRC[:12+4*3-1], false, ClassTruncated},
		{"15 csrc cut", with15CSRC[:len(with15CSRC)-1], false, ClassTruncated},
		{"csrc count too big", ccTooMany, false, ClassTruncated},
		{"extension header cut", withOneByte[:12+3], false, ClassTruncated},
		{"extension bit, no extension", xNoExt, false, ClassTruncated},
		{"extension body cut", withOneByte[:12+4+4], false, ClassTruncated},
		{"extension length too big", extTooLong, false, ClassTruncated},
		{"csrc+ext cut in extension", withAll[:12+12+4+3], false, ClassTruncated},
		{"padding zero", padZero, false, ClassTruncated},
		{"padding longer than payload", padTooLong, false, ClassTruncated},
		{"padding bit without payload", padNoPayload, false, ClassTruncated},

		{"version 0", withVersion(plain, 0), false, ClassBadVersion},
		{"version 1", withVersion(plain, 1), false, ClassBadVersion},
		{"version 3", withVersion(plain, 3), false, ClassBadVersion},
		{"version 1 muxed", withVersion(plain, 1), true, ClassBadVersion},
		// The version is checked first: one octet of version 1 is a bad
		// version, not a truncated packet.
		{"version 1 one octet", withVersion(plain[:1], 1), false, ClassBadVersion},
		{"version 0 rtcp muxed", withVersion(rtcpSR, 0), true, ClassBadVersion},
		{"ascii garbage", []byte("GET / HTTP/1.1\r\n"), false, ClassBadVersion}, // 'G' = 0b01...

		// RFC 5761 demultiplexing on a muxed port: octet 2 in 192–223 is RTCP.
		{"sr muxed", rtcpSR, true, ClassRTCP},
		{"rr muxed", rtcpRR, true, ClassRTCP},
		{"sr+sdes muxed", compound, true, ClassRTCP},
		{"sr+sdes cut muxed", compound[:len(compound)-4], true, ClassTruncated},
		{"rtcp 2 octets muxed", rtcpSR[:2], true, ClassTruncated},
		{"pt 96 muxed", plain, true, ClassRTP},
		{"pt 0 muxed", pcmu, true, ClassRTP},
		{"pt 96 marker muxed", marked96, true, ClassRTP},
		{"pt 72 muxed", rtp72, true, ClassRTP},
		// PT 72 with the marker is indistinguishable from an SR on a muxed
		// port (RFC 5761 §4 tells senders to avoid it); its "length" field
		// is the sequence number and does not fit.
		{"pt 72 marker muxed", rtp72m, true, ClassTruncated},
		{"pt 72 marker unmuxed", rtp72m, false, ClassRTP},
		// Without mux RTCP is not looked for: an SR parses as RTP (PT 72,
		// marker set). Links without mux read RTCP from the RTCP port only.
		{"sr unmuxed", rtcpSR, false, ClassRTP},
		{"rr unmuxed", rtcpRR, false, ClassRTP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.b, tt.mux); got != tt.want {
				t.Errorf("Classify(% x, mux=%v) = %v, want %v", tt.b, tt.mux, got, tt.want)
			}
			// Whatever we accept as RTP, pion parses.
			if Classify(tt.b, tt.mux) == ClassRTP {
				if err := (&rtp.Packet{}).Unmarshal(tt.b); err != nil {
					t.Errorf("Classify says RTP, pion says %v", err)
				}
			}
		})
	}
}

func TestClassifyRTCP(t *testing.T) {
	sr := marshalRTCP(t, senderReport())
	rr := marshalRTCP(t, receiverReport())
	compound := marshalRTCP(t, senderReport(), sdes())
	srLen := len(sr)
	bye := marshalRTCP(t, receiverReport(), &rtcp.Goodbye{Sources: []uint32{0x01020304}, Reason: "bye"})
	pli := marshalRTCP(t, receiverReport(), &rtcp.PictureLossIndication{SenderSSRC: 1, MediaSSRC: 2})

	secondV1 := append([]byte(nil), compound...)
	secondV1[srLen] = secondV1[srLen]&0x3f | 1<<6
	lengthTooBig := append([]byte(nil), rr...)
	binary.BigEndian.PutUint16(lengthTooBig[2:], uint16(len(rr)/4)) // one word more than there is
	lengthTooSmall := append([]byte(nil), rr...)
	binary.BigEndian.PutUint16(lengthTooSmall[2:], uint16(len(rr)/4-2)) // leaves one word as a "packet"

	tests := []struct {
		name string
		b    []byte
		want Class
	}{
		{"sr", sr, ClassRTCP},
		{"rr", rr, ClassRTCP},
		{"sr+sdes", compound, ClassRTCP},
		{"rr+bye", bye, ClassRTCP},
		{"rr+pli", pli, ClassRTCP},
		{"header only, length 0", []byte{0x80, 201, 0, 0}, ClassRTCP},
		{"unknown type", []byte{0x80, 255, 0, 1, 1, 2, 3, 4}, ClassRTCP},

		{"empty", nil, ClassTruncated},
		{"3 octets", sr[:3], ClassTruncated},
		{"sr cut", sr[:len(sr)-1], ClassTruncated},
		{"compound cut in second header", compound[:srLen+2], ClassTruncated},
		{"compound cut in second body", compound[:len(compound)-1], ClassTruncated},
		{"compound cut by a word", compound[:len(compound)-4], ClassTruncated},
		{"trailing octets", append(append([]byte(nil), compound...), 0x80, 0xc9), ClassTruncated},
		{"length too big", lengthTooBig, ClassTruncated},
		{"length too small", lengthTooSmall, ClassBadVersion}, // the left-over word is the report's DLSR, 0
		{"version 1", withVersion(sr, 1), ClassBadVersion},
		{"version 0", withVersion(sr, 0), ClassBadVersion},
		{"version 3", withVersion(sr, 3), ClassBadVersion},
		{"second packet version 1", secondV1, ClassBadVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyRTCP(tt.b); got != tt.want {
				t.Errorf("ClassifyRTCP(% x) = %v, want %v", tt.b, got, tt.want)
			}
			_, err := rtcp.Unmarshal(tt.b)
			if err == nil && ClassifyRTCP(tt.b) != ClassRTCP {
				t.Errorf("pion parses it, ClassifyRTCP says %v", ClassifyRTCP(tt.b))
			}
		})
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{
		ClassRTP: "rtp", ClassRTCP: "rtcp", ClassTruncated: "truncated", ClassBadVersion: "bad_version", 9: "class(9)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", c, got, want)
		}
	}
}

func TestClassifyAllocatesNothing(t *testing.T) {
	all := oneByteExt(t, rtp.Header{PayloadType: 96, CSRC: []uint32{1, 2}, Padding: true, PaddingSize: 3})
	b := marshalRTP(t, all, make([]byte, 160))
	c := marshalRTCP(t, senderReport(), sdes())
	if n := testing.AllocsPerRun(100, func() {
		Classify(b, true)
		Classify(c, true)
		ClassifyRTCP(c)
	}); n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

// opaqueExtensionProfile reports whether pion parses the elements of b's
// header extension (RFC 8285 one- and two-byte profiles), and if so returns a
// copy of b with a profile pion treats as opaque.
func opaqueExtensionProfile(b []byte) ([]byte, bool) {
	if len(b) < 12 || b[0]&0x10 == 0 {
		return nil, false
	}
	off := 12 + 4*int(b[0]&0x0f)
	if len(b) < off+4 {
		return nil, false
	}
	switch binary.BigEndian.Uint16(b[off:]) {
	case rtp.ExtensionProfileOneByte, rtp.ExtensionProfileTwoByte:
	default:
		return nil, false
	}
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[off:], 0x0001)
	return c, true
}

// FuzzClassify checks Classify against pion/rtp. The two agree exactly on
// version-2 input with these deliberate differences:
//
//   - pion does not check the version at all; Classify rejects anything but
//     version 2 (ClassBadVersion) before it looks at anything else.
//   - pion parses the elements of RFC 8285 one- and two-byte header
//     extensions and fails when an element runs past the extension block.
//     Classify only checks that the block fits: the link forwards packets
//     byte for byte and never reads the elements. Such a packet must parse
//     once its profile is made opaque.
//   - with mux, octet 2 in 192–223 makes a datagram RTCP (RFC 5761 §4),
//     whatever pion's RTP parser would say.
func FuzzClassify(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Classify(b, false)
		var p rtp.Packet
		err := p.Unmarshal(b)
		version2 := len(b) > 0 && b[0]>>6 == 2
		switch {
		case !version2:
			if c != ClassBadVersion && len(b) > 0 {
				t.Fatalf("version %d classified %v", b[0]>>6, c)
			}
			if len(b) == 0 && c != ClassTruncated {
				t.Fatalf("empty input classified %v", c)
			}
		case c == ClassRTP && err != nil:
			opaque, ok := opaqueExtensionProfile(b)
			if !ok {
				t.Fatalf("Classify says RTP, pion says %v", err)
			}
			if err := (&rtp.Packet{}).Unmarshal(opaque); err != nil {
				t.Fatalf("Classify says RTP, pion says %v even with an opaque extension profile", err)
			}
		case c != ClassRTP && err == nil:
			t.Fatalf("pion parses version-2 packet, Classify says %v", c)
		case c != ClassRTP && c != ClassTruncated:
			t.Fatalf("version-2 packet classified %v", c)
		}

		cm := Classify(b, true)
		if len(b) >= 2 && b[1] >= 192 && b[1] <= 223 && version2 {
			if want := ClassifyRTCP(b); cm != want {
				t.Fatalf("muxed RTCP range: Classify %v, ClassifyRTCP %v", cm, want)
			}
		} else if cm != c {
			t.Fatalf("outside the RTCP range mux changes the class: %v vs %v", cm, c)
		}
	})
}

// FuzzClassifyRTCP checks ClassifyRTCP against pion/rtcp. pion parses the
// bodies of the types it knows and fails on bodies that do not match their
// type (an SR whose count needs more reports than its length holds, say);
// ClassifyRTCP only checks the headers, since the link forwards RTCP byte for
// byte. So only one direction holds: what pion parses, ClassifyRTCP accepts.
func FuzzClassifyRTCP(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c := ClassifyRTCP(b)
		if _, err := rtcp.Unmarshal(b); err == nil && c != ClassRTCP {
			t.Fatalf("pion parses it, ClassifyRTCP says %v", c)
		}
		if c != ClassRTCP {
			return
		}
		// Walk the compound packet: every header is version 2 and its
		// length fits exactly.
		if len(b) < 4 {
			t.Fatalf("%d octets classified RTCP", len(b))
		}
		for rest := b; len(rest) > 0; {
			if len(rest) < 4 {
				t.Fatalf("%d octets left after the last packet", len(rest))
			}
			if rest[0]>>6 != 2 {
				t.Fatalf("packet at offset %d has version %d", len(b)-len(rest), rest[0]>>6)
			}
			n := 4 * (int(binary.BigEndian.Uint16(rest[2:])) + 1)
			if n > len(rest) {
				t.Fatalf("packet at offset %d claims %d octets, %d left", len(b)-len(rest), n, len(rest))
			}
			rest = rest[n:]
		}
	})
}
