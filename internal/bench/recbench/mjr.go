package recbench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Janus records a stream to an .mjr file (src/record.c): a header, written
// when the first packet is, then one record per packet, the packet after
// Janus rewrote its SSRC, sequence number and timestamp. Every number is
// big-endian.
//
//	"MJR00002"                      8 bytes, written when the file is created
//	info length                     2 bytes
//	info                            JSON: {"t":"a"|"v"|"d","c":codec,"s":created µs,"u":first packet µs,...}
//
//	Record, one per packet:
//	"MEET"                          4 bytes
//	offset                          4 bytes: ms since the first packet
//	length                          2 bytes: of the packet
//	the packet                      length bytes
const (
	mjrMagic     = "MJR00002"
	mjrRecord    = "MEET"
	mjrRecordHdr = 4 + 4 + 2
)

// mjrInfo is the header's JSON, the part the benchmark reads.
type mjrInfo struct {
	Type  string `json:"t"`
	Codec string `json:"c"`
}

var (
	errMJRNotYet = errors.New("mjr: the header is not written yet")
	errMJRBad    = errors.New("mjr: not a version 2 Janus recording")
)

// mjrReader reads an .mjr file record by record, from its header or from
// the start of a record (resumeMJR).
type mjrReader struct {
	r    *bufio.Reader
	off  int64 // bytes consumed through the last whole record
	info mjrInfo
	buf  []byte
}

// newMJRReader reads the header. A file cut inside it (Janus writes
// through stdio's buffer) is errMJRNotYet; another magic is errMJRBad.
func newMJRReader(r io.Reader) (*mjrReader, error) {
	m := &mjrReader{r: bufio.NewReaderSize(r, 64<<10), buf: make([]byte, 0xffff)}
	var h [len(mjrMagic) + 2]byte
	if n, err := io.ReadFull(m.r, h[:]); err != nil {
		if !strings.HasPrefix(mjrMagic, string(h[:min(n, len(mjrMagic))])) {
			return nil, errMJRBad
		}
		return nil, errMJRNotYet
	}
	if string(h[:len(mjrMagic)]) != mjrMagic {
		return nil, fmt.Errorf("%w (magic %q)", errMJRBad, h[:len(mjrMagic)])
	}
	info := m.buf[:binary.BigEndian.Uint16(h[len(mjrMagic):])]
	if _, err := io.ReadFull(m.r, info); err != nil {
		return nil, errMJRNotYet
	}
	if err := json.Unmarshal(info, &m.info); err != nil {
		return nil, fmt.Errorf("%w: its info: %v", errMJRBad, err)
	}
	m.off = int64(len(h) + len(info))
	return m, nil
}

// resumeMJR reads records from r, which starts at a record's start.
func resumeMJR(r io.Reader) *mjrReader {
	return &mjrReader{r: bufio.NewReaderSize(r, 64<<10), buf: make([]byte, 0xffff)}
}

// next returns the next packet, valid until the next call; io.EOF at the
// end, io.ErrUnexpectedEOF when the file ends inside a record (Janus has
// not written the rest yet), errMJRBad for a record without its "MEET".
func (m *mjrReader) next() ([]byte, error) {
	var h [mjrRecordHdr]byte
	n, err := io.ReadFull(m.r, h[:])
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, io.ErrUnexpectedEOF
	}
	if string(h[:4]) != mjrRecord {
		return nil, fmt.Errorf("%w: no record at byte %d", errMJRBad, m.off)
	}
	p := m.buf[:binary.BigEndian.Uint16(h[8:])]
	if _, err := io.ReadFull(m.r, p); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	m.off += int64(len(h) + len(p))
	return p, nil
}
