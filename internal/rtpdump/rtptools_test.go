package rtpdump

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rtptoolsDump finds rtptools' rtpdump: $RTPTOOLS (the directory it was
// built in; rtptools is not packaged in Debian: build
// https://github.com/irtlab/rtptools with ./configure && make), or PATH.
func rtptoolsDump(t *testing.T) string {
	if d := os.Getenv("RTPTOOLS"); d != "" {
		return filepath.Join(d, "rtpdump")
	}
	p, err := exec.LookPath("rtpdump")
	if err != nil {
		t.Skip("rtptools' rtpdump is not installed (set RTPTOOLS to the directory it was built in)")
	}
	return p
}

// TestRtptoolsReadsOurs: rtptools' own rtpdump reads a file our Writer
// wrote and prints every RTP packet's arrival offset, timestamp and
// sequence number (a leading "-" marks the marker bit) as we wrote them.
func TestRtptoolsReadsOurs(t *testing.T) {
	bin := rtptoolsDump(t)
	path := filepath.Join(t.TempDir(), "ours.rtpdump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, Header{Start: time.Unix(1_700_000_000, 0)}, 512)
	var want []string
	for i := 0; i < 300; i++ {
		p := make([]byte, 12+160+i%900)
		p[0], p[1] = 0x80, 0
		if i%10 == 0 {
			p[1] |= 0x80
		}
		binary.BigEndian.PutUint16(p[2:], uint16(65500+i))
		binary.BigEndian.PutUint32(p[4:], uint32(i*160))
		binary.BigEndian.PutUint32(p[8:], 0x1234)
		off := uint32(20*i + i%3)
		w.WriteRTP(off, p)
		if i%50 == 0 {
			w.WriteRTCP(off, []byte{0x80, 201, 0, 1, 0, 0, 0x12, 0x34})
		}
		sign := ""
		if i%10 == 0 && off >= 1000 { // it negates the seconds: no "-0"
			sign = "-"
		}
		want = append(want, fmt.Sprintf("%s%d.%06d %d %d", sign, off/1000, off%1000*1000, i*160, uint16(65500+i)))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command(bin, "-F", "short", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(want) {
		t.Fatalf("rtpdump printed %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: rtpdump says %q, want %q", i, got[i], want[i])
		}
	}
}

// TestReadsRtptoolsFile: our Reader reads rtptools' sample recording
// (bark.rtp in the rtptools source) to its end, when it is at hand.
func TestReadsRtptoolsFile(t *testing.T) {
	d := os.Getenv("RTPTOOLS")
	b, err := os.ReadFile(filepath.Join(d, "bark.rtp"))
	if d == "" || err != nil {
		t.Skip("set RTPTOOLS to an rtptools source directory with bark.rtp")
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err = r.Next(); err != nil {
			break
		}
		n++
	}
	if err.Error() != "EOF" || n == 0 || r.Offset() != int64(len(b)) {
		t.Fatalf("%d records, %v, %d of %d bytes", n, err, r.Offset(), len(b))
	}
	t.Logf("bark.rtp: %d records, line %q", n, r.Line())
}
