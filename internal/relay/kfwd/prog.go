package kfwd

import (
	"github.com/cilium/ebpf/asm"
)

// Offsets in the program's view of a packet, which starts at the Ethernet
// header (also on loopback, whose header is all zeros but the type).
const (
	offEthType  = 12
	offIP       = 14
	offIPCsum   = offIP + 10
	offIPFrag   = offIP + 6
	offIPProto  = offIP + 9
	offIPSrc    = offIP + 12 // saddr, daddr, then the UDP ports: 12 bytes a Key mirrors
	offUDPLen   = offIP + 20 + 4
	offUDPCsum  = offIP + 20 + 6
	offPayload  = offIP + 20 + 8
	minLen      = offPayload + 8 // the smallest RTCP packet
	ethPIPLE    = 0x0008         // ETH_P_IP in network order, read as a little-endian u16
	fragMaskLE  = 0xff3f         // IP_MF|IP_OFFSET in network order, read little-endian
	ipProtoUDP  = 17
	afInet      = 2
	rtpVerMask  = 0xc0
	rtpVersion2 = 0x80
)

// struct __sk_buff fields the program reads.
const (
	skbLen     = 0
	skbData    = 76
	skbDataEnd = 80
	skbGSOSegs = 164
)

// Flags and return codes.
const (
	fPseudoHdr    = 1 << 4 // BPF_F_PSEUDO_HDR
	fMarkMangled0 = 1 << 5 // BPF_F_MARK_MANGLED_0
	tcxNext       = -1     // TCX_NEXT: leave the packet to the next program, then the stack
	tcxPass       = 0      // TCX_PASS: deliver, skipping later programs
	stackKey      = -16    // the Key, 12 bytes
	stackExt      = -24    // the RTP header extension's length field, 2 bytes
	valOffOut     = 0      // value.Out: saddr, daddr, sport, dport as in the packet
	valOffOif     = 12
	valOffPackets = 16
	valOffBytes   = 24
)

// program returns the TCX ingress classifier for the flow map with the
// given descriptor; it forwards no UDP payload larger than maxPayload. It is written with the assembler rather than compiled
// from C so that building Convene needs no clang; every step says what the C
// would have been.
func program(mapFD, maxPayload int) asm.Instructions {
	ins := asm.Instructions{
		// ctx in r6 for the helpers; data and data_end in r2, r3.
		asm.Mov.Reg(asm.R6, asm.R1),
		// if (skb->gso_segs > 1) return NEXT;  a GRO'd batch is not one datagram
		asm.LoadMem(asm.R2, asm.R6, skbGSOSegs, asm.Word),
		asm.JGT.Imm(asm.R2, 1, "next"),
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		// if (data + minLen > data_end) return NEXT;
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minLen),
		asm.JGT.Reg(asm.R4, asm.R3, "next"),
		// IPv4, no options, not a fragment, UDP, payload version 2.
		asm.LoadMem(asm.R4, asm.R2, offEthType, asm.Half),
		asm.JNE.Imm(asm.R4, ethPIPLE, "next"),
		asm.LoadMem(asm.R4, asm.R2, offIP, asm.Byte),
		asm.JNE.Imm(asm.R4, 0x45, "next"),
		asm.LoadMem(asm.R4, asm.R2, offIPFrag, asm.Half),
		asm.And.Imm(asm.R4, fragMaskLE),
		asm.JNE.Imm(asm.R4, 0, "next"),
		asm.LoadMem(asm.R4, asm.R2, offIPProto, asm.Byte),
		asm.JNE.Imm(asm.R4, ipProtoUDP, "next"),
		asm.LoadMem(asm.R4, asm.R2, offPayload, asm.Byte),
		asm.And.Imm(asm.R4, rtpVerMask),
		asm.JNE.Imm(asm.R4, rtpVersion2, "next"),
		// struct key k = {saddr, daddr, sport, dport};  copied from the packet
		asm.LoadMem(asm.R4, asm.R2, offIPSrc, asm.Word),
		asm.StoreMem(asm.RFP, stackKey, asm.R4, asm.Word),
		asm.LoadMem(asm.R4, asm.R2, offIPSrc+4, asm.Word),
		asm.StoreMem(asm.RFP, stackKey+4, asm.R4, asm.Word),
		asm.LoadMem(asm.R4, asm.R2, offIPSrc+8, asm.Word),
		asm.StoreMem(asm.RFP, stackKey+8, asm.R4, asm.Word),
		// v = bpf_map_lookup_elem(&flows, &k); if (!v) return NEXT;
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "next"),
		asm.Mov.Reg(asm.R7, asm.R0),
	}
	ins = append(ins, checkRTP(maxPayload)...)
	ins = append(ins, rewrite()...)
	ins = append(ins,
		// if (v->oif == 0) return PASS;
		asm.LoadMem(asm.R1, asm.R7, valOffOif, asm.Word),
		asm.JNE.Imm(asm.R1, 0, "out"),
		asm.Mov.Imm(asm.R0, tcxPass),
		asm.Return(),
		// The kernel routes it out of the relay's interface and fills in
		// the Ethernet header from its neighbour table (resolving it if
		// need be, as for any locally sent datagram):
		//   return bpf_redirect_neigh(v->oif, NULL, 0, 0);
		asm.Mov.Imm(asm.R2, 0).WithSymbol("out"),
		asm.Mov.Imm(asm.R3, 0),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRedirectNeigh.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("next"),
		asm.Return(),
	)
	return ins
}

// checkRTP leaves to user space every datagram whose RTP header the relay
// would look at more closely or refuse there (package rtplink's Classify),
// so that the fast path forwards exactly what user space would:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=2|P|X|  CC   |M|     PT      |       sequence number         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 timestamp, SSRC, CC x CSRC ...                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      defined by profile       |   extension length (words)    |  if X
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// (RFC 3550 §5.1, §5.3.1): a payload larger than maxPayload, padding (P),
// an RTCP packet type (200-207 with the marker bit's range, 192-223, which
// user space checks as a compound packet, RFC 5761 §4), a UDP length that
// does not fit the datagram, or a CSRC list or header extension that runs
// past the payload. In C, with v in r7 and the packet re-read after the map
// lookup:
//
//	b0 = data[payload]; b1 = data[payload+1];
//	if (b1 >= 192 && b1 <= 223) return NEXT;
//	if (b0 & 0x20) return NEXT;
//	ulen = ntohs(udp->len);
//	if (ulen < 8+12 || 14+20+ulen > skb->len) return NEXT;
//	plen = ulen - 8; if (plen > maxPayload) return NEXT;
//	n = 12 + 4*(b0 & 0x0f); if (n > plen) return NEXT;
//	if (b0 & 0x10) {
//		if (n+4 > plen) return NEXT;
//		if (bpf_skb_load_bytes(skb, payload+n+2, &ext, 2)) return NEXT;
//		n += 4 + 4*ntohs(ext); if (n > plen) return NEXT;
//	}
func checkRTP(maxPayload int) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minLen),
		asm.JGT.Reg(asm.R4, asm.R3, "next"),
		asm.LoadMem(asm.R8, asm.R2, offPayload, asm.Byte),
		asm.LoadMem(asm.R4, asm.R2, offPayload+1, asm.Byte),
		asm.LoadMem(asm.R9, asm.R2, offUDPLen, asm.Half),
		asm.JLT.Imm(asm.R4, 192, "rtp_pt"),
		asm.JLE.Imm(asm.R4, 223, "next"),
		asm.JSet.Imm(asm.R8, 0x20, "next").WithSymbol("rtp_pt"),
		asm.HostTo(asm.BE, asm.R9, asm.Half),
		asm.JLT.Imm(asm.R9, 8+12, "next"),
		asm.LoadMem(asm.R4, asm.R6, skbLen, asm.Word),
		asm.Mov.Reg(asm.R5, asm.R9),
		asm.Add.Imm(asm.R5, offIP+20),
		asm.JGT.Reg(asm.R5, asm.R4, "next"),
		asm.Sub.Imm(asm.R9, 8),
		asm.JGT.Imm(asm.R9, int32(maxPayload), "next"),
		asm.Mov.Reg(asm.R4, asm.R8),
		asm.And.Imm(asm.R4, 0x0f),
		asm.LSh.Imm(asm.R4, 2),
		asm.Add.Imm(asm.R4, 12),
		asm.JGT.Reg(asm.R4, asm.R9, "next"),
		asm.JSet.Imm(asm.R8, 0x10, "ext"),
		asm.Ja.Label("rewrite"),
		asm.Mov.Reg(asm.R8, asm.R4).WithSymbol("ext"),
		asm.Add.Imm(asm.R4, 4),
		asm.JGT.Reg(asm.R4, asm.R9, "next"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Add.Imm(asm.R2, offPayload+2),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stackExt),
		asm.Mov.Imm(asm.R4, 2),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "next"),
		asm.LoadMem(asm.R4, asm.RFP, stackExt, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.LSh.Imm(asm.R4, 2),
		asm.Add.Imm(asm.R4, 4),
		asm.Add.Reg(asm.R8, asm.R4),
		asm.JGT.Reg(asm.R8, asm.R9, "next"),
	}
}

// rewrite counts the datagram on v (r7) and gives it v's addresses and
// ports, fixing the checksums on the way:
//
//	__sync_fetch_and_add(&v->packets, 1);
//	__sync_fetch_and_add(&v->bytes, skb->len);
//	bpf_l3_csum_replace(skb, IP check, k.saddr, v->saddr, 4);   and daddr
//	bpf_l4_csum_replace(skb, UDP check, k.saddr, v->saddr, PSEUDO|MANGLED_0|4);   and daddr
//	bpf_l4_csum_replace(skb, UDP check, k.ports, v->ports, MANGLED_0|4);
//	bpf_skb_store_bytes(skb, offsetof saddr, v, 12, 0);
func rewrite() asm.Instructions {
	ins := asm.Instructions{
		asm.Mov.Imm(asm.R1, 1).WithSymbol("rewrite"),
		asm.AddAtomic.Mem(asm.R7, asm.R1, asm.DWord, valOffPackets),
		asm.LoadMem(asm.R1, asm.R6, skbLen, asm.Word),
		asm.AddAtomic.Mem(asm.R7, asm.R1, asm.DWord, valOffBytes),
	}
	csum := func(fn asm.BuiltinFunc, off int32, word int16, flags int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, off),
			asm.LoadMem(asm.R3, asm.RFP, stackKey+word, asm.Word),
			asm.LoadMem(asm.R4, asm.R7, valOffOut+word, asm.Word),
			asm.Mov.Imm(asm.R5, flags),
			fn.Call(),
		}
	}
	ins = append(ins, csum(asm.FnL3CsumReplace, offIPCsum, 0, 4)...)
	ins = append(ins, csum(asm.FnL3CsumReplace, offIPCsum, 4, 4)...)
	ins = append(ins, csum(asm.FnL4CsumReplace, offUDPCsum, 0, fPseudoHdr|fMarkMangled0|4)...)
	ins = append(ins, csum(asm.FnL4CsumReplace, offUDPCsum, 4, fPseudoHdr|fMarkMangled0|4)...)
	ins = append(ins, csum(asm.FnL4CsumReplace, offUDPCsum, 8, fMarkMangled0|4)...)
	ins = append(ins,
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, offIPSrc),
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.Mov.Imm(asm.R4, 12),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
	)
	return ins
}
