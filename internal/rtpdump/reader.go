package rtpdump

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// Reader reads an rtpdump file record by record.
type Reader struct {
	r       *bufio.Reader
	h       Header
	line    string
	buf     []byte // holds one record's packet; reused
	hdr     [RecordHeaderLen]byte
	records int
	off     int64 // bytes consumed through the last whole record
}

// NewReader reads the text line and the file header from r. A file that
// does not start with "#!rtpplay1.0 " is ErrBadMagic; a line without a
// newline within MaxLine bytes, or a short binary header, is ErrBadHeader.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	line := make([]byte, 0, MaxLine)
	for {
		c, err := br.ReadByte()
		if err != nil {
			if len(line) < len(Magic) || string(line[:len(Magic)]) != Magic {
				return nil, ErrBadMagic
			}
			return nil, fmt.Errorf("%w: the text line has no end", ErrBadHeader)
		}
		line = append(line, c)
		if len(line) <= len(Magic) && line[len(line)-1] != Magic[len(line)-1] {
			return nil, ErrBadMagic
		}
		if c == '\n' {
			break
		}
		if len(line) >= MaxLine {
			return nil, fmt.Errorf("%w: the text line is longer than %d bytes", ErrBadHeader, MaxLine)
		}
	}
	if len(line) <= len(Magic) { // "#!rtpplay1.0\n": the magic's space is missing
		return nil, ErrBadMagic
	}
	var fh [FileHeaderLen]byte
	if _, err := io.ReadFull(br, fh[:]); err != nil {
		return nil, fmt.Errorf("%w: the file ends inside the %d-byte binary header", ErrBadHeader, FileHeaderLen)
	}
	sec, usec := binary.BigEndian.Uint32(fh[0:]), binary.BigEndian.Uint32(fh[4:])
	if usec >= 1e6 {
		return nil, fmt.Errorf("%w: %d microseconds", ErrBadHeader, usec)
	}
	rd := &Reader{r: br, buf: make([]byte, MaxPacket),
		line: strings.TrimSuffix(string(line[len(Magic):]), "\n"),
		off:  int64(len(line) + FileHeaderLen)}
	rd.h.Start = time.Unix(int64(sec), int64(usec)*1000).UTC()
	addr := netip.AddrFrom4([4]byte(fh[8:12]))
	if addr.IsUnspecified() {
		// An address that is not IPv4 may be in the text line.
		if ap, err := netip.ParseAddrPort(strings.Replace(rd.line, "/", ":", 1)); err == nil {
			addr = ap.Addr()
		} else if i := strings.LastIndexByte(rd.line, '/'); i > 0 {
			if a, err := netip.ParseAddr(strings.Trim(rd.line[:i], "[]")); err == nil {
				addr = a
			}
		}
	}
	rd.h.Source = netip.AddrPortFrom(addr, binary.BigEndian.Uint16(fh[12:]))
	return rd, nil
}

// Header returns the file header.
func (r *Reader) Header() Header { return r.h }

// Line returns the text line after the magic: "address/port".
func (r *Reader) Line() string { return r.line }

// Records returns how many whole records Next has returned.
func (r *Reader) Records() int { return r.records }

// Offset returns how many bytes of the file the header and the records
// returned so far take: where the next record starts.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the next record. p.Data is the Reader's: valid until the
// next call. At the end of the file it returns io.EOF; a file that ends
// inside a record returns a *TruncatedError (errors.Is io.ErrUnexpectedEOF);
// a record whose length is shorter than its header is ErrBadRecord.
func (r *Reader) Next() (Packet, error) {
	h := r.hdr[:]
	n, err := io.ReadFull(r.r, h)
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return Packet{}, io.EOF
		}
		return Packet{}, r.torn(err)
	}
	length := int(binary.BigEndian.Uint16(h[0:]))
	plen := int(binary.BigEndian.Uint16(h[2:]))
	if length < RecordHeaderLen {
		return Packet{}, fmt.Errorf("%w: record %d at byte %d has length %d", ErrBadRecord, r.records+1, r.off, length)
	}
	data := r.buf[:length-RecordHeaderLen]
	if _, err := io.ReadFull(r.r, data); err != nil {
		return Packet{}, r.torn(err)
	}
	r.records++
	r.off += int64(length)
	return Packet{Offset: binary.BigEndian.Uint32(h[4:]), RTCP: plen == 0, OrigLen: plen, Data: data}, nil
}

func (r *Reader) torn(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &TruncatedError{Records: r.records, GoodBytes: r.off}
	}
	return err
}
