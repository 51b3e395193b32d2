package hls

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

func rtpPacket(seq uint16, ts uint32, marker bool, payload []byte) []byte {
	b := make([]byte, 12, 12+len(payload))
	b[0] = 0x80
	b[1] = 96
	if marker {
		b[1] |= 0x80
	}
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], ts)
	binary.BigEndian.PutUint32(b[8:], 0x1234)
	return append(b, payload...)
}

// fuA splits a NAL unit into FU-A payloads of at most n bytes each.
func fuA(nalu []byte, n int) [][]byte {
	var out [][]byte
	body := nalu[1:]
	for i := 0; i < len(body); i += n {
		end := min(i+n, len(body))
		h := byte(0)
		if i == 0 {
			h |= 0x80
		}
		if end == len(body) {
			h |= 0x40
		}
		out = append(out, append([]byte{nalu[0]&0xe0 | 28, h | nalu[0]&0x1f}, body[i:end]...))
	}
	return out
}

// TestDepacketizer: a keyframe's SPS and PPS in a STAP-A and its IDR
// slice in FU-A fragments make one access unit of three NAL units, the
// next frame's single NAL unit another; a lost fragment drops its unit
// and says so; a duplicate is ignored; a unit whose marker was lost ends
// at the next timestamp.
func TestDepacketizer(t *testing.T) {
	sps, pps := []byte{0x67, 1, 2, 3}, []byte{0x68, 4, 5}
	idrNALU := append([]byte{0x65}, bytes.Repeat([]byte{7}, 3000)...)
	stap := []byte{24, 0, byte(len(sps))}
	stap = append(stap, sps...)
	stap = append(stap, 0, byte(len(pps)))
	stap = append(stap, pps...)
	frags := fuA(idrNALU, 1000)

	var d depacketizer
	seq := uint16(65530) // wraps
	push := func(ts uint32, marker bool, p []byte) ([]*au, error) {
		seq++
		return d.push(rtpPacket(seq, ts, marker, p))
	}
	if out, err := push(1000, false, stap); out != nil || err != nil {
		t.Fatalf("STAP-A: %v %v", out, err)
	}
	var got []*au
	for i, f := range frags {
		out, err := push(1000, i == len(frags)-1, f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
	}
	if len(got) != 1 || len(got[0].nalus) != 3 || !bytes.Equal(got[0].nalus[0], sps) || !bytes.Equal(got[0].nalus[1], pps) ||
		!bytes.Equal(got[0].nalus[2], idrNALU) || got[0].ts != 1000 || !idr(got[0].nalus) {
		t.Fatalf("the keyframe: %+v", got)
	}
	// A duplicate of the last packet: nothing.
	if out, err := d.push(rtpPacket(seq, 1000, true, frags[len(frags)-1])); out != nil || err != nil {
		t.Errorf("a duplicate: %v %v", out, err)
	}
	// The next frame, one NAL unit.
	out, err := push(7000, true, []byte{0x41, 9, 9})
	if err != nil || len(out) != 1 || len(out[0].nalus) != 1 || idr(out[0].nalus) {
		t.Fatalf("a P frame: %+v %v", out, err)
	}
	// A keyframe whose middle fragment is lost: dropped, with an error.
	push(13000, false, frags[0])
	seq++ // lost
	var lost error
	got = nil
	for _, f := range frags[2:] {
		out, err := push(13000, f[1]&0x40 != 0, f)
		got = append(got, out...)
		if err != nil {
			lost = err
		}
	}
	if len(got) != 0 || lost == nil {
		t.Errorf("a unit with a lost fragment: %d units, %v", len(got), lost)
	}
	// A unit without its marker ends at the next timestamp.
	push(19000, false, []byte{0x41, 1})
	out, err = push(25000, true, []byte{0x41, 2})
	if err != nil || len(out) != 2 || out[0].ts != 19000 || out[1].ts != 25000 {
		t.Errorf("a unit without its marker: %+v %v", out, err)
	}
	// Bad packets.
	for _, b := range [][]byte{nil, {0x80}, rtpPacket(seq+1, 0, true, nil), rtpPacket(seq+2, 0, true, []byte{24, 0, 9, 1}), rtpPacket(seq+3, 0, true, []byte{30, 1})} {
		if _, err := d.push(b); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

// FuzzDepacketizer: whatever the child (or a local process on its port)
// sends, the depacketizer does not panic, and what it returns is bounded
// and made of non-empty NAL units.
func FuzzDepacketizer(f *testing.F) {
	f.Add(rtpPacket(1, 1, true, []byte{0x65, 1}), rtpPacket(2, 2, true, []byte{24, 0, 2, 0x67, 1, 0, 1, 0x68}))
	f.Add(rtpPacket(1, 1, false, []byte{28, 0x85, 1, 2}), rtpPacket(2, 1, true, []byte{28, 0x45, 3}))
	f.Add([]byte{0xb0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x65}, []byte{0xa0, 0x80, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0x65, 2})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var d depacketizer
		for _, p := range [][]byte{a, b, a, b} {
			out, _ := d.push(p)
			for _, u := range out {
				n := 0
				for _, x := range u.nalus {
					if len(x) == 0 {
						t.Fatal("an empty NAL unit")
					}
					n += len(x)
				}
				if n > maxAU || len(u.nalus) > maxNALUs {
					t.Fatalf("a unit of %d bytes, %d NAL units", n, len(u.nalus))
				}
			}
		}
	})
}

// TestTimeline: a source's spacing holds; a new SSRC or a jump starts a
// new run at the wall clock, never before the last time; a run ahead of
// the wall clock (a burst) closes in by shortened steps; a late or
// repeated timestamp is dropped.
func TestTimeline(t *testing.T) {
	epoch := time.Now()
	tl := newTimeline(epoch, 90000)
	at := func(ssrc, ts uint32, ms int) int64 {
		p, ok := tl.at(ssrc, ts, epoch.Add(time.Duration(ms)*time.Millisecond))
		if !ok {
			return -1
		}
		return p
	}
	if p := at(1, 500, 1000); p != 90000 {
		t.Fatalf("first: %d, want the wall clock's 90000", p)
	}
	if p := at(1, 500+6000, 1066); p != 96000 {
		t.Errorf("next frame: %d, want 96000", p)
	}
	if p := at(1, 500+6000, 1100); p != -1 {
		t.Errorf("a repeated timestamp: %d, want dropped", p)
	}
	// A new child: a new run at the wall clock.
	if p := at(2, 77, 3000); p != 270000 {
		t.Errorf("a new SSRC: %d, want 270000", p)
	}
	// A burst: ten frames at once, then frames in real time; the times
	// grow and come back to the wall clock.
	last := int64(270000)
	ts := uint32(77)
	for i := range 10 {
		ts += 6000
		p := at(2, ts, 3001+i)
		if p <= last {
			t.Fatalf("burst frame %d: %d after %d", i, p, last)
		}
		last = p
	}
	ms := 3010
	for range 300 {
		ts += 6000
		ms += 66
		p := at(2, ts, ms)
		if p <= last {
			t.Fatalf("%d after %d", p, last)
		}
		last = p
	}
	if ahead := last - int64(ms)*90; ahead > 90000/50+6000 {
		t.Errorf("still %d ahead of the wall clock after 20 s", ahead)
	}
	// A jump back in the source's timestamps (a restarted source): a
	// new run, after the last time.
	if p := at(2, 5, ms+66); p <= last {
		t.Errorf("after a jump: %d, not after %d", p, last)
	}
}
