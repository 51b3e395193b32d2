package rtpdump

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"
)

// Sizes of the parts of a file.
const (
	// Magic starts the text line; the address/port and "\n" follow it.
	Magic = "#!rtpplay1.0 "
	// MaxLine bounds the text line, newline included; rtptools reads it
	// with an 80-byte fgets.
	MaxLine = 80
	// FileHeaderLen is the size of the binary file header (RD_hdr_t).
	FileHeaderLen = 16
	// RecordHeaderLen is the size of a record's header (RD_packet_t).
	RecordHeaderLen = 8
	// MaxPacket is the largest packet a record holds: length is 16 bits
	// and counts the record header.
	MaxPacket = 0xffff - RecordHeaderLen
)

// Header is what a file says about the whole recording.
type Header struct {
	// Start is the wall-clock time the offsets count from (microseconds).
	Start time.Time
	// Source is the address and port the packets were received on or
	// from; the zero value is written as 0.0.0.0/0. Only an IPv4 address
	// fits the binary header; another is written in the text line only.
	Source netip.AddrPort
}

// Packet is one record.
type Packet struct {
	// Offset is the arrival time, milliseconds after Header.Start.
	Offset uint32
	// RTCP is set for an RTCP packet (plen 0).
	RTCP bool
	// OrigLen is the packet's length on the wire (plen) for RTP; it is
	// larger than len(Data) when only the headers were recorded. 0 for RTCP.
	OrigLen int
	// Data is the recorded packet. A Reader owns it: it is valid until
	// the next call to Next.
	Data []byte
}

// Errors. A torn last record is a *TruncatedError, which matches
// io.ErrUnexpectedEOF with errors.Is.
var (
	ErrBadMagic  = errors.New("rtpdump: not an rtpdump file (no \"#!rtpplay1.0 \" line)")
	ErrBadHeader = errors.New("rtpdump: bad file header")
	ErrBadRecord = errors.New("rtpdump: bad record")
	ErrTooLarge  = errors.New("rtpdump: packet larger than a record can hold")
)

// TruncatedError reports a file that ends inside a record: a torn last
// write. Records whole records precede it; they end GoodBytes into the file.
type TruncatedError struct {
	Records   int
	GoodBytes int64
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("rtpdump: file ends inside record %d (%d whole records, %d good bytes)",
		e.Records+1, e.Records, e.GoodBytes)
}

// Unwrap makes errors.Is(err, io.ErrUnexpectedEOF) true.
func (e *TruncatedError) Unwrap() error { return io.ErrUnexpectedEOF }

// line returns the text line for h, newline included.
func (h Header) line() string {
	a := h.Source.Addr()
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	return fmt.Sprintf("%s%s/%d\n", Magic, a.Unmap(), h.Source.Port())
}
