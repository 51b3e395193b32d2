package rtpdump

import (
	"encoding/binary"
	"io"
	"time"
)

// DefaultBufferSize is the Writer's buffer when NewWriter is given 0.
const DefaultBufferSize = 16 << 10

// Writer writes an rtpdump file. Records collect in its buffer and reach
// the underlying writer (one write(2) on an *os.File) when the buffer is
// full or on Flush; the buffer only ever holds whole records, so what a
// flush wrote is whole records too unless the write itself failed half
// way (see Durable).
//
// A Writer is not safe for concurrent use. After a write error every
// later call returns that error.
type Writer struct {
	w       io.Writer
	buf     []byte
	start   time.Time
	written int64 // bytes the underlying writer took
	durable int64 // of them, the end of the last whole record
	err     error
	// bigHeader is set while the buffer ends with the header of a record
	// too big for it, whose body follows in a write of its own.
	bigHeader bool
}

// NewWriter writes the text line and file header of h into a buffer of
// bufSize bytes (DefaultBufferSize if 0) and returns the Writer; nothing
// reaches w before the first flush.
func NewWriter(w io.Writer, h Header, bufSize int) *Writer {
	if bufSize <= 0 {
		bufSize = DefaultBufferSize
	}
	if bufSize < MaxLine+FileHeaderLen {
		bufSize = MaxLine + FileHeaderLen
	}
	wr := &Writer{w: w, buf: make([]byte, 0, bufSize), start: h.Start}
	wr.buf = append(wr.buf, h.line()...)
	var fh [FileHeaderLen]byte
	usec := h.Start.UnixMicro()
	binary.BigEndian.PutUint32(fh[0:], uint32(usec/1e6))
	binary.BigEndian.PutUint32(fh[4:], uint32(usec%1e6))
	if a := h.Source.Addr().Unmap(); a.Is4() {
		b := a.As4()
		copy(fh[8:12], b[:])
	}
	binary.BigEndian.PutUint16(fh[12:], h.Source.Port())
	wr.buf = append(wr.buf, fh[:]...)
	return wr
}

// Offset returns t as a record offset: milliseconds since the header's
// Start, 0 before it.
func (w *Writer) Offset(t time.Time) uint32 {
	d := t.Sub(w.start)
	if d < 0 {
		return 0
	}
	return uint32(d / time.Millisecond)
}

// WriteRTP appends an RTP packet that arrived offset ms after the start.
// The Writer copies b; the caller keeps it.
func (w *Writer) WriteRTP(offset uint32, b []byte) error { return w.write(offset, b, len(b)) }

// WriteRTCP appends an RTCP packet (plen 0).
func (w *Writer) WriteRTCP(offset uint32, b []byte) error { return w.write(offset, b, 0) }

// Write appends p as read from another file: an RTP packet keeps its
// OrigLen when that is larger than Data (rtpdump kept only its headers).
func (w *Writer) Write(p Packet) error {
	if p.RTCP {
		return w.WriteRTCP(p.Offset, p.Data)
	}
	return w.write(p.Offset, p.Data, max(len(p.Data), min(p.OrigLen, 0xffff)))
}

func (w *Writer) write(offset uint32, b []byte, plen int) error {
	if w.err != nil {
		return w.err
	}
	if len(b) > MaxPacket {
		return ErrTooLarge
	}
	n := RecordHeaderLen + len(b)
	if len(w.buf)+n > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	var h [RecordHeaderLen]byte
	binary.BigEndian.PutUint16(h[0:], uint16(n))
	binary.BigEndian.PutUint16(h[2:], uint16(plen))
	binary.BigEndian.PutUint32(h[4:], offset)
	if n > cap(w.buf) { // larger than the whole buffer: straight through
		w.buf = append(w.buf, h[:]...)
		w.bigHeader = true
		err := w.Flush()
		w.bigHeader = false
		if err != nil {
			return err
		}
		return w.writeOut(b, true)
	}
	w.buf = append(w.buf, h[:]...)
	w.buf = append(w.buf, b...)
	return nil
}

// Flush hands the buffered records to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	err := w.writeOut(w.buf, false)
	w.buf = w.buf[:0]
	return err
}

// writeOut writes b; whole says b ends a record (a big record's body).
func (w *Writer) writeOut(b []byte, body bool) error {
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
		if !body {
			w.durable = w.written + int64(wholeRecords(b[:n], w.written == 0))
		}
		// A big record's body: the header before it is torn with it.
		w.written += int64(n)
		return err
	}
	w.written += int64(n)
	if !w.bigHeader {
		w.durable = w.written
	}
	return nil
}

// wholeRecords returns how many bytes of b, which starts at a record (or,
// when first, at the text line), are whole records.
func wholeRecords(b []byte, first bool) int {
	off := 0
	if first {
		i := indexNL(b)
		if i < 0 || i+1+FileHeaderLen > len(b) {
			return 0
		}
		off = i + 1 + FileHeaderLen
	}
	for off+RecordHeaderLen <= len(b) {
		n := int(binary.BigEndian.Uint16(b[off:]))
		if n < RecordHeaderLen || off+n > len(b) {
			break
		}
		off += n
	}
	return off
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// Buffered returns how many bytes wait in the buffer.
func (w *Writer) Buffered() int { return len(w.buf) }

// Written returns how many bytes the underlying writer took.
func (w *Writer) Written() int64 { return w.written }

// Durable returns how many bytes at the start of the underlying file are
// the header and whole records: after a failed write, truncating the file
// to Durable leaves it readable to its last whole record.
func (w *Writer) Durable() int64 { return w.durable }

// Err returns the error that stopped the Writer, if any.
func (w *Writer) Err() error { return w.err }
