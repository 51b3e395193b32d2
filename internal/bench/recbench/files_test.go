package recbench

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/rtpdump"
)

// packet is a load packet of stream s numbered n, as a publisher sends
// it: an RTP header with one CSRC and a header extension, then the
// payload with its stamp and mark.
func packet(video bool, s, n uint32) []byte {
	pl := make([]byte, minPayload(video)+5)
	putMark(pl, video, s, n, time.Unix(1, 0))
	h := []byte{0x91, 96, 0, byte(n), 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, // V=2 X CC=1
		0xbe, 0xde, 0, 1, 0x10, 0xff, 0, 0} // one-byte extensions, one word
	return append(h, pl...)
}

func TestMark(t *testing.T) {
	for _, video := range []bool{false, true} {
		s, n, ok := readMark(packet(video, 7, 1234))
		if !ok || s != 7 || n != 1234 {
			t.Errorf("video %v: %d %d %v", video, s, n, ok)
		}
		// A retransmission in the RTX format: the original sequence
		// number before the payload.
		p := packet(video, 3, 9)
		at, _ := payloadAt(p)
		rtx := append(append(append([]byte{}, p[:at]...), 0x12, 0x34), p[at:]...)
		if s, n, ok := readMark(rtx); !ok || s != 3 || n != 9 {
			t.Errorf("rtx, video %v: %d %d %v", video, s, n, ok)
		}
	}
	if _, _, ok := readMark([]byte{0x80, 0, 0, 1}); ok {
		t.Error("a short packet has a mark")
	}
	if _, _, ok := readMark(append([]byte{0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 40)...)); ok {
		t.Error("a packet of zeros has a mark")
	}
}

// mjrRecord is one .mjr record of pkt.
func mjrRecordOf(pkt []byte, ms uint32) []byte {
	r := []byte(mjrRecord)
	r = binary.BigEndian.AppendUint32(r, ms)
	r = binary.BigEndian.AppendUint16(r, uint16(len(pkt)))
	return append(r, pkt...)
}

// TestMJR reads a tiny .mjr file as Janus writes it, a piece at a time
// (the header alone, a record cut in two, the rest), as files.scan finds
// it while Janus is writing.
func TestMJR(t *testing.T) {
	info := `{"t":"a","c":"opus","s":1764064000000000,"u":1764064000100000}`
	head := append([]byte(mjrMagic), byte(len(info)>>8), byte(len(info)))
	head = append(head, info...)
	var recs []byte
	for n := range uint32(5) {
		recs = append(recs, mjrRecordOf(packet(false, 2, n), 20*n)...)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "videoroom-1000-user-1-audio-0.mjr")
	f := newFiles(dir)
	ws := windows{newWindow(0, 1), newWindow(0, 0), newWindow(0, 5)} // stream 0 sent one packet, 1 none
	var saw []uint32
	visit := func(s, n uint32) {
		saw = append(saw, n)
		ws.mark(s, n)
	}
	cut := len(head) + 2*len(mjrRecordOf(packet(false, 2, 0), 0)) + 7 // inside the third record
	for _, upto := range []int{4, len(head), cut, len(head) + len(recs)} {
		if err := os.WriteFile(path, append(head, recs...)[:upto], 0o644); err != nil {
			t.Fatal(err)
		}
		f.scan(visit)
	}
	if len(saw) != 5 || f.Bad != 0 {
		t.Fatalf("read packets %v (%d bad: %v), want 0 to 4 once each", saw, f.Bad, f.BadErr)
	}
	if p, s := ws.missing(); p != 1 || s != 1 || ws[2].missing() != 0 || ws[1].got != 0 {
		t.Errorf("missing %d packets of %d streams, want stream 0's one packet", p, s)
	}
	if ws.sent() != 1+0+5 {
		t.Errorf("sent %d", ws.sent())
	}

	// Not a Janus recording: counted bad, not read.
	os.WriteFile(filepath.Join(dir, "old.mjr"), []byte("MJR00001\x00\x02{}"), 0o644)
	f.scan(visit)
	if f.Bad != 1 {
		t.Errorf("an old-format file: %d bad", f.Bad)
	}
}

// newDump creates a recording's rtpdump file in a new directory and
// returns the directory and a Writer of the file with a buffer of size.
func newDump(t *testing.T, size int) (string, *rtpdump.Writer) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec", "000-video-1.rtpdump")
	os.MkdirAll(filepath.Dir(path), 0o755)
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return dir, rtpdump.NewWriter(fh, rtpdump.Header{Start: time.Unix(1764064000, 0)}, size)
}

// TestRTPDump reads Convene's rtpdump files the same way: what the writer
// flushed, then what it flushed since, RTCP left out.
func TestRTPDump(t *testing.T) {
	dir, w := newDump(t, 1<<10)
	f := newFiles(dir)
	ws := windows{newWindow(10, 20)}
	for n := uint32(10); n < 20; n++ {
		if err := w.WriteRTP(n, packet(true, 0, n)); err != nil {
			t.Fatal(err)
		}
		if n == 12 {
			w.WriteRTCP(n, []byte{0x80, 200, 0, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		}
		if n%4 == 0 {
			w.Flush()
			f.scan(ws.mark)
		}
	}
	w.Flush()
	f.scan(ws.mark)
	if ws[0].missing() != 0 || f.Records != 10 || f.Unmarked != 0 || f.Bad != 0 {
		t.Errorf("missing %d, %d records, %d unmarked, %d bad (%v)", ws[0].missing(), f.Records, f.Unmarked, f.Bad, f.BadErr)
	}
}

// TestTailWhileWriting: the files are read while Convene's writer writes
// them (whole pages when its buffer fills, whole pages on its timer, the
// rest later), so a read often ends inside a record; every packet is
// still read exactly once.
func TestTailWhileWriting(t *testing.T) {
	dir, w := newDump(t, 64<<10)
	const total = 20000
	f := newFiles(dir)
	ws := windows{newWindow(0, total)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := uint32(0); n < total; n++ {
			p := packet(true, 0, n)
			p = append(p, make([]byte, int(n*131)%1100)...)
			if err := w.WriteRTP(n, p); err != nil {
				t.Error(err)
				return
			}
			if n%97 == 0 {
				w.FlushPages()
			}
		}
		w.Flush()
	}()
	for {
		select {
		case <-done:
			f.scan(ws.mark)
			if ws[0].missing() != 0 || f.Records != total || f.Bad != 0 {
				t.Fatalf("missing %d, %d records of %d, %d unmarked, %d bad (%v)", ws[0].missing(), f.Records, total, f.Unmarked, f.Bad, f.BadErr)
			}
			return
		default:
			f.scan(ws.mark)
		}
	}
}
