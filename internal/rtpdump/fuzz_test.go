package rtpdump

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader: any input gives a header error or records followed by
// io.EOF, a TruncatedError or ErrBadRecord; never a panic. What it reads,
// written again, reads back the same.
func FuzzReader(f *testing.F) {
	f.Add(spec)
	f.Add(spec[:50])
	f.Add([]byte("#!rtpplay1.0 1.2.3.4/5\n"))
	f.Add([]byte("#!rtpplay1.0 [::1]/5\n0123456789abcdef\x00\x08\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrBadHeader) {
				t.Fatalf("header error %v", err)
			}
			return
		}
		var out bytes.Buffer
		w := NewWriter(&out, r.Header(), 0)
		var got []Packet
		for {
			p, err := r.Next()
			if err != nil {
				var te *TruncatedError
				if err != io.EOF && !errors.As(err, &te) && !errors.Is(err, ErrBadRecord) {
					t.Fatalf("record error %v", err)
				}
				if te != nil && (te.Records != r.Records() || te.GoodBytes > int64(len(in))) {
					t.Fatalf("%+v after %d records", te, r.Records())
				}
				break
			}
			p.Data = append([]byte(nil), p.Data...)
			got = append(got, p)
			if err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		w.Flush()
		r2, err := NewReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range got {
			q, err := r2.Next()
			if err != nil || q.Offset != p.Offset || q.RTCP != p.RTCP || !bytes.Equal(q.Data, p.Data) {
				t.Fatalf("record %d rewritten: %+v %v, want %+v", i, q, err, p)
			}
		}
	})
}
