// Package rtpdump reads and writes the rtpdump file format of rtptools
// (rtpdump, rtpplay; Wireshark 4.2 and later open it too): the packets of
// RTP and RTCP streams exactly as received, each with its arrival time.
//
// The format is described in rtptools' rtpdump.h and rtpdump(1)
// (https://github.com/irtlab/rtptools/blob/master/rtpdump.h,
// https://www.cs.columbia.edu/irt/software/rtptools/). A file is one line
// of text, a 16-byte binary header, then one record per packet. Every
// number is big-endian (network order).
//
//	"#!rtpplay1.0 " address "/" port "\n"      e.g. "#!rtpplay1.0 224.2.0.1/3456\n"
//
//	File header (RD_hdr_t), 16 bytes:
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            start of recording: seconds since 1970 (UTC)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            start of recording: microseconds                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            source: IPv4 address (0 if none)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          source: UDP port     |           padding (0)         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	Record (RD_packet_t header, then the packet), one per packet:
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  length = 8 + bytes recorded  | plen: RTP length, 0 for RTCP  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            offset: milliseconds since the start of recording  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            the RTP or RTCP packet (length - 8 bytes) ...      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// rtpdump may keep only the headers of RTP packets: plen is then larger
// than length - 8. Convene's Writer always keeps whole packets.
//
// Memory: the Writer copies each packet into its own buffer and never
// keeps the caller's slice; the Reader returns packets in a buffer of its
// own that the next call to Next overwrites. Neither allocates per packet.
package rtpdump
