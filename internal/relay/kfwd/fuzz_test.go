package kfwd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// FuzzProgram runs the classifier on arbitrary frames in the kernel
// (BPF_PROG_TEST_RUN), with one loopback flow installed. Whatever the
// frame, the verifier-checked program must either leave it byte for byte
// (TCX_NEXT) or, for a well-formed datagram of that flow, pass it on with
// exactly the flow's addresses and ports and valid checksums, and only when
// user space would have forwarded it too: a payload of at most the maximum
// size, an RTP header whose CSRC list and extension fit (media.Classify),
// no padding and no RTCP packet type (those user space checks itself).
func FuzzProgram(f *testing.F) {
	testutil.NeedRoot(f, "loading an eBPF program")
	src := netip.MustParseAddrPort("127.0.0.2:4000")
	dst := netip.MustParseAddrPort("127.0.0.1:5000")
	out := key(f, netip.MustParseAddrPort("127.0.0.1:5002"), netip.MustParseAddrPort("127.0.0.3:6000"))
	in := key(f, src, dst)
	flows, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: uint32(binary.Size(Key{})),
		ValueSize: uint32(binary.Size(value{})), MaxEntries: 4})
	if err != nil {
		f.Fatal(err)
	}
	defer flows.Close()
	if err := flows.Update(&in, &value{Out: out}, ebpf.UpdateAny); err != nil {
		f.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: program(flows.FD(), fuzzMaxPayload)})
	if err != nil {
		f.Fatal(err)
	}
	defer prog.Close()

	frame := func(ip []byte) []byte {
		return append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00}, ip...)
	}
	f.Add(frame(ipUDP(src, dst, rtpPacket(1, 160))))
	f.Add(frame(ipUDP(src, dst, rtpPacket(2, 0))))
	f.Add(frame(ipUDP(src, dst, []byte{0x81, 200, 0, 1, 0, 0, 0, 1})))
	f.Add(frame(ipUDP(netip.MustParseAddrPort("127.0.0.2:4001"), dst, rtpPacket(3, 20))))
	f.Add(frame(ipUDP(src, dst, []byte{0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42})))
	f.Add(frame(ipUDP(src, dst, rtpPacket(4, fuzzMaxPayload-12))))
	f.Add(frame(ipUDP(src, dst, rtpPacket(5, fuzzMaxPayload-11))))
	f.Add(frame(ipUDP(src, dst, withHeader(0x8f, rtpPacket(6, 40)))))  // 15 CSRCs, 40 bytes
	f.Add(frame(ipUDP(src, dst, withHeader(0x82, rtpPacket(7, 8)))))   // 2 CSRCs fit
	f.Add(frame(ipUDP(src, dst, withExt(rtpPacket(8, 20), 4))))        // extension fits
	f.Add(frame(ipUDP(src, dst, withExt(rtpPacket(9, 20), 200))))      // extension runs past
	f.Add(frame(ipUDP(src, dst, withHeader(0xa0, rtpPacket(10, 20))))) // padding
	f.Add([]byte{})
	f.Add(make([]byte, 14))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 14 || len(data) > 1500 {
			return // test runs need an Ethernet header; frames stay within an MTU
		}
		got := make([]byte, len(data)+256)
		ret, err := prog.Run(&ebpf.RunOptions{Data: data, DataOut: got})
		if errors.Is(err, unix.EINVAL) {
			return // the test harness refuses the frame (e.g. IPv4 with no IP header) before the program runs
		}
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		switch int32(ret) {
		case tcxNext:
			// Some frames come back resized by the test harness; compare
			// what the program could have touched.
			if !bytes.Equal(got[:len(data)], data) {
				t.Fatalf("left to the stack but changed:\n in %x\nout %x", data, got[:len(data)])
			}
		case tcxPass:
			ip := got[14:len(data)]
			if pl := data[14+28 : 14+int(binary.BigEndian.Uint16(data[14+24:]))+20]; !userForwards(pl) {
				t.Fatalf("forwarded a payload user space would not: %x", pl)
			}
			if !bytes.Equal(ip[12:24], keyBytes(out)) {
				t.Fatalf("forwarded with addresses %x, want %x", ip[12:24], keyBytes(out))
			}
			if !bytes.Equal(data[14+12:14+24], keyBytes(in)) {
				t.Fatalf("forwarded a datagram of another flow: %x", data[14+12:14+24])
			}
			orig := data[14:]
			if fold(sum(orig[:20])) == 0xffff && fold(sum(ip[:20])) != 0xffff {
				t.Fatalf("IP checksum broken by the rewrite: %x", ip[:20])
			}
			if udpValid(orig) && !udpValid(ip) {
				t.Fatalf("UDP checksum broken by the rewrite: %x", ip)
			}
			if !bytes.Equal(ip[24:26], orig[24:26]) || !bytes.Equal(ip[28:], orig[28:]) {
				t.Fatal("the program changed the UDP length or the payload")
			}
		default:
			t.Fatalf("program returned %d for a loopback flow", int32(ret))
		}
	})
}

// fuzzMaxPayload is the largest payload the fuzzed program forwards.
const fuzzMaxPayload = 1000

// userForwards reports whether the relay's user space forwards payload p of
// a flow as RTP without a closer look: what the program may forward.
func userForwards(p []byte) bool {
	return len(p) <= fuzzMaxPayload && media.Classify(p, false) == media.ClassRTP &&
		p[0]&0x20 == 0 && (p[1] < 192 || p[1] > 223)
}

// withHeader sets an RTP packet's first octet (V, P, X, CC).
func withHeader(b0 byte, p []byte) []byte {
	p[0] = b0
	return p
}

// withExt marks p as having a header extension right after the fixed
// header that claims words 32-bit words.
func withExt(p []byte, words uint16) []byte {
	p[0] |= 0x10
	p[12], p[13] = 0xbe, 0xde
	binary.BigEndian.PutUint16(p[14:], words)
	return p
}

func keyBytes(k Key) []byte {
	b := append(append([]byte{}, k.Src[:]...), k.Dst[:]...)
	return append(append(b, k.SPort[:]...), k.DPort[:]...)
}

// udpValid checks the UDP checksum of an IPv4 datagram whose UDP length
// fits; a zero checksum (none) counts as valid.
func udpValid(ip []byte) bool {
	ul := int(binary.BigEndian.Uint16(ip[24:26]))
	if ul < 8 || 20+ul > len(ip) {
		return false
	}
	if ip[26] == 0 && ip[27] == 0 {
		return true
	}
	pseudo := append(append([]byte{}, ip[12:20]...), 0, 17, ip[24], ip[25])
	return fold(sum(pseudo)+sum(ip[20:20+ul])) == 0xffff
}
