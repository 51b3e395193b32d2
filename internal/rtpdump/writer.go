package rtpdump

import (
	"encoding/binary"
	"io"
	"time"
)

// DefaultBufferSize is the Writer's buffer when NewWriter is given 0.
const DefaultBufferSize = 16 << 10

// pageSize is what writes of a full buffer line up with.
const pageSize = 4096

// Writer writes an rtpdump file. Records collect in its buffer and reach
// the underlying writer (one write(2) on an *os.File) on Flush, which
// writes whole records, and when the buffer is full: then the Writer
// writes it up to the last page boundary of the file it reaches and keeps
// the rest, so that no write leaves a page half written for the next one
// to fill again (a file system zeroes the rest of a new page a write ends
// in: a fifth of the cost of writing video, in the recording benchmark).
// Such a write may end inside a record; Durable says where whole records
// end.
//
// A Writer is not safe for concurrent use. After a write error every
// later call returns that error.
type Writer struct {
	w       io.Writer
	buf     []byte
	start   time.Time
	written int64 // bytes the underlying writer took
	durable int64 // of them, the end of the last whole record
	first   int   // where in buf the first record starting in it starts
	align   int   // the page size writes of a full buffer line up with
	err     error
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
	wr.first = len(wr.buf)
	wr.align = pageSize
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
		if err := w.spill(n); err != nil {
			return err
		}
	}
	var h [RecordHeaderLen]byte
	binary.BigEndian.PutUint16(h[0:], uint16(n))
	binary.BigEndian.PutUint16(h[2:], uint16(plen))
	binary.BigEndian.PutUint32(h[4:], offset)
	if n > cap(w.buf) { // larger than the whole buffer: straight through
		w.buf = append(w.buf, h[:]...)
		if err := w.Flush(); err != nil {
			return err
		}
		return w.writeOut(b)
	}
	w.buf = append(w.buf, h[:]...)
	w.buf = append(w.buf, b...)
	return nil
}

// Flush hands the buffered records to the underlying writer.
func (w *Writer) Flush() error { return w.flushTo(len(w.buf)) }

// FlushPages hands the buffered bytes up to the last page boundary of the
// file they reach to the underlying writer and keeps the rest (a part of a
// page), which may end inside a record; Flush writes that too.
func (w *Writer) FlushPages() error {
	p := w.pages()
	if p <= 0 {
		return nil
	}
	return w.flushTo(p)
}

// pages is how much of the buffer reaches the file's last page boundary
// that the buffer reaches (0 or less: none).
func (w *Writer) pages() int {
	return len(w.buf) - int((w.written+int64(len(w.buf)))%int64(w.align))
}

// spill makes room for a record of n bytes: it writes the buffer up to the
// last page boundary of the file that the buffer reaches and keeps the
// rest, or all of it when there is no such boundary or the rest and the
// record would not fit.
func (w *Writer) spill(n int) error {
	p := w.pages()
	if p <= 0 || len(w.buf)-p+n > cap(w.buf) {
		return w.Flush()
	}
	return w.flushTo(p)
}

// flushTo writes the first p buffered bytes and keeps the rest.
func (w *Writer) flushTo(p int) error {
	if w.err != nil {
		return w.err
	}
	if p == 0 {
		return nil
	}
	n, err := w.w.Write(w.buf[:p])
	if err == nil && n < p {
		err = io.ErrShortWrite
	}
	// The records in the buffer are whole (a big record's header, whose
	// body follows, aside): walk them to the last that ends in what was
	// written.
	off := w.first
	for off+RecordHeaderLen <= len(w.buf) {
		l := int(binary.BigEndian.Uint16(w.buf[off:]))
		if l < RecordHeaderLen || off+l > n {
			break
		}
		off += l
	}
	if off <= n {
		w.durable = w.written + int64(off)
	}
	w.written += int64(n)
	if err != nil {
		w.err = err
		return err
	}
	switch {
	case p == len(w.buf):
		w.first = 0
	case off == p:
		w.first = 0
	default: // the record at off runs past p
		w.first = off + int(binary.BigEndian.Uint16(w.buf[off:])) - p
	}
	w.buf = w.buf[:copy(w.buf, w.buf[p:])]
	return nil
}

// writeOut writes a big record's body, which ends that record.
func (w *Writer) writeOut(b []byte) error {
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	w.written += int64(n)
	if err != nil {
		w.err = err // the header before it is torn with it
		return err
	}
	w.durable = w.written
	return nil
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
