package rtpdump

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"
)

// spec is a file written byte by byte from rtpdump.h: the text line, the
// 16-byte RD_hdr_t and two RD_packet_t records, one RTP and one RTCP.
var spec = []byte("#!rtpplay1.0 192.0.2.7/5004\n" +
	// RD_hdr_t: start 1700000000 s (0x6553f100) + 250000 us (0x0003d090),
	// source 192.0.2.7, port 5004 (0x138c), padding
	"\x65\x53\xf1\x00" + "\x00\x03\xd0\x90" + "\xc0\x00\x02\x07" + "\x13\x8c" + "\x00\x00" +
	// RD_packet_t: length 8+14=22, plen 14, offset 20 ms; then RTP
	// V=2 PT=0 seq=1 ts=160 SSRC=0x11223344, payload ff ff
	"\x00\x16" + "\x00\x0e" + "\x00\x00\x00\x14" +
	"\x80\x00\x00\x01" + "\x00\x00\x00\xa0" + "\x11\x22\x33\x44" + "\xff\xff" +
	// RD_packet_t: length 8+8=16, plen 0 (RTCP), offset 1000 ms; then an
	// empty RR from SSRC 0x11223344
	"\x00\x10" + "\x00\x00" + "\x00\x00\x03\xe8" +
	"\x80\xc9\x00\x01" + "\x11\x22\x33\x44")

var specRTP = []byte("\x80\x00\x00\x01\x00\x00\x00\xa0\x11\x22\x33\x44\xff\xff")
var specRTCP = []byte("\x80\xc9\x00\x01\x11\x22\x33\x44")

func specHeader() Header {
	return Header{Start: time.Unix(1700000000, 250000*1000),
		Source: netip.MustParseAddrPort("192.0.2.7:5004")}
}

// TestSpecBytes: the Reader reads a file written from the spec, and the
// Writer writes exactly those bytes for the same packets.
func TestSpecBytes(t *testing.T) {
	r, err := NewReader(bytes.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if !h.Start.Equal(specHeader().Start) || h.Source != specHeader().Source || r.Line() != "192.0.2.7/5004" {
		t.Fatalf("header %+v line %q", h, r.Line())
	}
	p, err := r.Next()
	if err != nil || p.RTCP || p.Offset != 20 || p.OrigLen != 14 || !bytes.Equal(p.Data, specRTP) {
		t.Fatalf("first record %+v %v", p, err)
	}
	p, err = r.Next()
	if err != nil || !p.RTCP || p.Offset != 1000 || !bytes.Equal(p.Data, specRTCP) {
		t.Fatalf("second record %+v %v", p, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
	if r.Records() != 2 || r.Offset() != int64(len(spec)) {
		t.Fatalf("records %d offset %d", r.Records(), r.Offset())
	}

	var out bytes.Buffer
	w := NewWriter(&out, specHeader(), 0)
	if err := w.WriteRTP(20, specRTP); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRTCP(w.Offset(specHeader().Start.Add(1000*time.Millisecond+400*time.Microsecond)), specRTCP); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), spec) {
		t.Fatalf("the Writer wrote\n%q\nwant\n%q", out.Bytes(), spec)
	}
	if w.Durable() != int64(len(spec)) || w.Written() != int64(len(spec)) {
		t.Fatalf("durable %d written %d", w.Durable(), w.Written())
	}
}

// TestRoundTrip: packets of every size, small and larger than the buffer,
// read back identical and in order.
func TestRoundTrip(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, Header{Start: time.Unix(1, 0)}, 200)
	var want [][]byte
	for i, n := range []int{12, 1, 0, 199, 200, 1500, MaxPacket, 13} {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i + j)
		}
		want = append(want, b)
		if err := w.WriteRTP(uint32(i), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteRTP(0, make([]byte, MaxPacket+1)); err != ErrTooLarge {
		t.Fatalf("oversize packet: %v", err)
	}
	w.Flush()
	r, err := NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Line() != "0.0.0.0/0" {
		t.Errorf("line %q for no source", r.Line())
	}
	for i, b := range want {
		p, err := r.Next()
		if err != nil || !bytes.Equal(p.Data, b) || p.Offset != uint32(i) || (len(b) > 0 && p.RTCP) {
			t.Fatalf("record %d: %d bytes offset %d err %v", i, len(p.Data), p.Offset, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

// writeSizes records the size of every write.
type writeSizes struct {
	bytes.Buffer
	sizes []int
}

func (w *writeSizes) Write(b []byte) (int, error) {
	w.sizes = append(w.sizes, len(b))
	return w.Buffer.Write(b)
}

// TestSpillsEndOnPages: a full buffer is written up to a page boundary of
// the file, the rest kept for the next write, so every write but a
// Flush's ends on a page; the file still holds every record as written.
func TestSpillsEndOnPages(t *testing.T) {
	var out writeSizes
	w := NewWriter(&out, specHeader(), 16<<10)
	var want [][]byte
	for i := 0; i < 3000; i++ {
		b := make([]byte, 12+(i*37)%1400) // sizes that never divide a page
		for j := range b {
			b[j] = byte(i ^ j)
		}
		want = append(want, b)
		if err := w.WriteRTP(uint32(i), b); err != nil {
			t.Fatal(err)
		}
		if i%500 == 250 { // a flush timer's tick: whole pages, the rest kept
			if err := w.FlushPages(); err != nil {
				t.Fatal(err)
			}
			if w.Written()%pageSize != 0 || w.Buffered() >= pageSize {
				t.Fatalf("after FlushPages: written %d buffered %d", w.Written(), w.Buffered())
			}
		}
		if i%500 == 499 { // a last tick: everything, whole records
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if w.Durable() != w.Written() || w.Buffered() != 0 {
				t.Fatalf("after Flush: durable %d written %d buffered %d", w.Durable(), w.Written(), w.Buffered())
			}
		}
	}
	w.Flush()
	off, unaligned := 0, 0
	for _, n := range out.sizes {
		if off += n; off%pageSize != 0 {
			unaligned++
		}
	}
	// Only a Flush may end off a page: 6 of them (every 500th and the last).
	if len(out.sizes) < 100 || unaligned > 6 {
		t.Fatalf("%d writes, %d ending off a page; want at most the 6 flushes", len(out.sizes), unaligned)
	}
	r, err := NewReader(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range want {
		p, err := r.Next()
		if err != nil || !bytes.Equal(p.Data, b) || p.Offset != uint32(i) {
			t.Fatalf("record %d: %d bytes offset %d err %v", i, len(p.Data), p.Offset, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

// TestTorn: a file cut at any byte reads its whole records and then says
// how many there were and where they end; never a panic.
func TestTorn(t *testing.T) {
	for cut := 0; cut < len(spec); cut++ {
		r, err := NewReader(bytes.NewReader(spec[:cut]))
		if cut < 28+FileHeaderLen {
			if err == nil {
				t.Fatalf("cut at %d: no error for a torn file header", cut)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		n := 0
		for {
			_, err = r.Next()
			if err != nil {
				break
			}
			n++
		}
		var te *TruncatedError
		switch {
		case cut == 44 || cut == 66:
			if err != io.EOF {
				t.Fatalf("cut at a record boundary %d: %v", cut, err)
			}
		case !errors.As(err, &te) || !errors.Is(err, io.ErrUnexpectedEOF):
			t.Fatalf("cut at %d: %v, want a TruncatedError", cut, err)
		case te.Records != n || (n == 0 && te.GoodBytes != 44) || (n == 1 && te.GoodBytes != 66):
			t.Fatalf("cut at %d: %+v after %d records", cut, te, n)
		}
	}
}

func TestBadHeaders(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", ErrBadMagic},
		{"#!rtpplay2.0 1.2.3.4/5\n" + string(make([]byte, 16)), ErrBadMagic},
		{"GIF89a", ErrBadMagic},
		{"#!rtpplay1.0\n" + string(make([]byte, 16)), ErrBadMagic},
		{"#!rtpplay1.0 " + string(bytes.Repeat([]byte("1"), 100)), ErrBadHeader},
		{"#!rtpplay1.0 1.2.3.4/5\n\x00\x00", ErrBadHeader},
		{"#!rtpplay1.0 1.2.3.4/5\n\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00", ErrBadHeader},
	} {
		if _, err := NewReader(bytes.NewReader([]byte(c.in))); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.in, err, c.want)
		}
	}
	r, _ := NewReader(bytes.NewReader(append(append([]byte{}, spec[:44]...), 0, 4, 0, 0, 0, 0, 0, 0)))
	if _, err := r.Next(); !errors.Is(err, ErrBadRecord) {
		t.Errorf("record length 4: %v", err)
	}
}

func TestIPv6Source(t *testing.T) {
	var out bytes.Buffer
	h := Header{Start: time.Unix(5, 0), Source: netip.MustParseAddrPort("[2001:db8::1]:6000")}
	w := NewWriter(&out, h, 0)
	w.Flush()
	r, err := NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Header().Source != h.Source || r.Line() != "2001:db8::1/6000" {
		t.Fatalf("source %v line %q", r.Header().Source, r.Line())
	}
}

// failAfter is an io.Writer that takes n bytes and then fails as a full
// disk does (a short write with an error).
type failAfter struct {
	bytes.Buffer
	n int
}

var errFull = errors.New("no space left on device")

func (f *failAfter) Write(b []byte) (int, error) {
	if f.Len()+len(b) <= f.n {
		return f.Buffer.Write(b)
	}
	k := f.n - f.Len()
	f.Buffer.Write(b[:k])
	return k, errFull
}

// TestWriteErrorDurable: when the disk fills half way through a flush,
// the error sticks and Durable marks the end of the last whole record, so
// the file cut there reads cleanly.
func TestWriteErrorDurable(t *testing.T) {
	for limit := 0; limit < 600; limit += 7 {
		f := &failAfter{n: limit % 300}
		w := NewWriter(f, specHeader(), 64)
		if limit >= 300 {
			w.align = 16 // spills that end inside records
		}
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			err = w.WriteRTP(uint32(i), specRTP)
		}
		if err == nil {
			err = w.Flush()
		}
		if !errors.Is(err, errFull) || !errors.Is(w.WriteRTP(0, specRTP), errFull) {
			t.Fatalf("limit %d: %v", limit, err)
		}
		d := w.Durable()
		if d > int64(f.Len()) {
			t.Fatalf("durable %d past the %d bytes written", d, f.Len())
		}
		if d == 0 {
			continue
		}
		r, err := NewReader(bytes.NewReader(f.Bytes()[:d]))
		if err != nil {
			t.Fatalf("limit %d durable %d: %v", limit, d, err)
		}
		for err == nil {
			_, err = r.Next()
		}
		if err != io.EOF || int64(44+r.Records()*22) != d {
			t.Fatalf("limit %d durable %d: %d records, %v", limit, d, r.Records(), err)
		}
	}
}

// TestDurableAcrossSpills: while spills cut records, Durable is always the
// end of the last whole record written, and the file cut there reads.
func TestDurableAcrossSpills(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, specHeader(), 64)
	w.align = 16
	for i := 0; i < 200; i++ {
		if err := w.WriteRTP(uint32(i), specRTP[:i%len(specRTP)]); err != nil {
			t.Fatal(err)
		}
		d := w.Durable()
		if d > w.Written() || w.Written() != int64(out.Len()) {
			t.Fatalf("durable %d written %d file %d", d, w.Written(), out.Len())
		}
		if d == 0 {
			continue
		}
		r, err := NewReader(bytes.NewReader(out.Bytes()[:d]))
		if err != nil {
			t.Fatalf("durable %d: %v", d, err)
		}
		for err == nil {
			_, err = r.Next()
		}
		if err != io.EOF {
			t.Fatalf("record %d: the file cut at durable %d: %v", i, d, err)
		}
		// Durable never lags the last whole record by more than the buffer.
		if w.Written()-d > 64 {
			t.Fatalf("durable %d, written %d", d, w.Written())
		}
	}
}

// The hot paths allocate nothing.
func TestNoAllocs(t *testing.T) {
	w := NewWriter(io.Discard, specHeader(), 0)
	if a := testing.AllocsPerRun(1000, func() { w.WriteRTP(1, specRTP) }); a != 0 {
		t.Errorf("WriteRTP: %v allocations", a)
	}
	var file bytes.Buffer
	w = NewWriter(&file, specHeader(), 0)
	for i := 0; i < 1100; i++ {
		w.WriteRTP(uint32(i), specRTP)
	}
	w.Flush()
	r, _ := NewReader(&file)
	if a := testing.AllocsPerRun(1000, func() { r.Next() }); a != 0 {
		t.Errorf("Next: %v allocations", a)
	}
}

func BenchmarkWriteRTP(b *testing.B) {
	w := NewWriter(io.Discard, specHeader(), 0)
	pkt := make([]byte, 172)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for i := 0; i < b.N; i++ {
		w.WriteRTP(uint32(i), pkt)
	}
}
