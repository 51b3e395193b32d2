package mixer

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/media"
)

// sender publishes a tone into a room as a member's track, in PCMU or,
// with an encoder, in pt.
type sender struct {
	t     *broker.Track
	freq  float64
	amp   float64
	phase float64
	seq   uint16
	ts    uint32
	enc   codec.Encoder // nil: PCMU
	pt    uint8
}

// packet is the next 20 ms of the tone as an RTP packet.
func (s *sender) packet() *media.Packet {
	rate := 8000
	if s.enc != nil {
		rate = 48000
	}
	pcm := make([]int16, rate/50)
	for i := range pcm {
		pcm[i] = int16(s.amp * math.Sin(s.phase))
		s.phase += 2 * math.Pi * s.freq / float64(rate)
	}
	pk := media.NewPacket()
	b := pk.Buffer()
	b[0], b[1] = 0x80, s.pt
	binary.BigEndian.PutUint16(b[2:], s.seq)
	binary.BigEndian.PutUint32(b[4:], s.ts)
	binary.BigEndian.PutUint32(b[8:], 1234)
	var n int
	if s.enc != nil {
		n, _ = s.enc.Encode(pcm, b[12:])
	} else {
		n = audio.EncodeMulaw(b[12:], pcm)
	}
	pk.SetLen(12 + n)
	s.seq++
	s.ts += uint32(len(pcm))
	return pk
}

func (s *sender) send() { s.t.Publish(s.packet()) }

// ear collects what one output hears, decoded.
type ear struct {
	mu  sync.Mutex
	pcm []int16
	n   int // packets
}

func (e *ear) Deliver(pk *media.Packet, _ *broker.Track) {
	defer pk.Release()
	b := pk.Bytes()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(b) > 12 {
		out := make([]int16, len(b)-12)
		audio.DecodeMulaw(out, b[12:])
		e.pcm = append(e.pcm, out...)
	}
}

func (e *ear) packets() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *ear) heard() []int16 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int16(nil), e.pcm...)
}

func join(t testing.TB, r *broker.Room, id, owner string) *broker.Track {
	t.Helper()
	tr, err := r.Join(broker.Member{ID: id, Kind: media.Audio, Sends: true, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// run sends 1.5 s of the senders' tones in real time.
func run(senders ...*sender) {
	for range 75 {
		for _, s := range senders {
			s.send()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMixMinus: each member hears the others' voices and not its own; a
// member that does not speak hears everyone; the outputs that hear the
// full mix share one encoding per frame.
func TestMixMinus(t *testing.T) {
	m := NewMetrics()
	svc := NewService(Options{Metrics: m})
	defer svc.Close()
	r := broker.NewRoom("s")
	a := &sender{t: join(t, r, "la", "A"), freq: 440, amp: 6000}
	b := &sender{t: join(t, r, "lb", "B"), freq: 1000, amp: 6000}
	ears := map[string]*ear{"A": {}, "B": {}, "C": {}, "D": {}}
	for owner, e := range ears {
		d, err := svc.Attach("s", "", r, &Output{ID: "out-" + owner, Owner: owner, Codec: codec.PCMU, Sink: e})
		if err != nil {
			t.Fatal(err)
		}
		defer d()
	}
	run(a, b)
	check := func(who string, want, not []float64) {
		t.Helper()
		x := ears[who].heard()
		if len(x) < 8000 {
			t.Fatalf("%s heard %d samples in 1.5 s", who, len(x))
		}
		x = x[len(x)/3:] // past the jitter buffer's start
		for _, f := range want {
			if sh := audio.WindowedToneShare(x, f, 8000); sh < 0.25 {
				t.Errorf("%s: %v Hz holds %.2f of what it hears, want it there", who, f, sh)
			}
		}
		for _, f := range not {
			if sh := audio.ToneShare(x, f, 8000); sh > 0.02 {
				t.Errorf("%s: %v Hz holds %.2f of what it hears, want it gone", who, f, sh)
			}
		}
	}
	check("A", []float64{1000}, []float64{440})
	check("B", []float64{440}, []float64{1000})
	check("C", []float64{440, 1000}, nil)
	// A and B speak and get their own mix-minus; C and D hear the same full
	// mix, encoded once: three encodings a frame, not four.
	if per := promtest.ToFloat64(m.frames) / float64(ears["C"].packets()); per > 3.2 {
		t.Fatalf("%.2f encodings a frame for 2 speakers and 2 listeners, want 3", per)
	}
}

// TestFloorAndSpeakers: a gated track (no floor) is not in the mix; with
// K = 1 only the loudest of two is mixed, and the speaker is announced.
func TestFloorAndSpeakers(t *testing.T) {
	var mu sync.Mutex
	var announced [][]string
	svc := NewService(Options{Speakers: 1, OnSpeakers: func(_, _ string, sp []string) {
		mu.Lock()
		announced = append(announced, sp)
		mu.Unlock()
	}})
	defer svc.Close()
	r := broker.NewRoom("s")
	loud := &sender{t: join(t, r, "la", "A"), freq: 440, amp: 12000}
	soft := &sender{t: join(t, r, "lb", "B"), freq: 1000, amp: 1500}
	gated := &sender{t: join(t, r, "lc", "C"), freq: 2000, amp: 12000}
	gated.t.SetGated(true)
	e := &ear{}
	d, err := svc.Attach("s", "", r, &Output{ID: "out", Owner: "D", Codec: codec.PCMU, Sink: e})
	if err != nil {
		t.Fatal(err)
	}
	defer d()
	run(loud, soft, gated)
	x := e.heard()
	x = x[len(x)/3:]
	// Windowed, as TestMixMinus: a late sender's concealed frame breaks
	// the tone's phase, not its presence.
	if sh := audio.WindowedToneShare(x, 440, 8000); sh < 0.5 {
		t.Errorf("the loudest speaker holds %.2f of the mix", sh)
	}
	if sh := audio.ToneShare(x, 1000, 8000); sh > 0.02 {
		t.Errorf("the second speaker holds %.2f of a one-speaker mix", sh)
	}
	if sh := audio.ToneShare(x, 2000, 8000); sh > 0.02 {
		t.Errorf("a member without the floor holds %.2f of the mix", sh)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(announced) == 0 || len(announced[0]) != 1 || announced[0][0] != "A" {
		t.Fatalf("speakers announced %v, want [[A]]", announced)
	}
}

// TestSubgroupsAndCapacity: a group's mixer hears only its group; the
// node refuses a mixer beyond its capacity; the last output stops one.
func TestSubgroupsAndCapacity(t *testing.T) {
	svc := NewService(Options{Max: 1})
	defer svc.Close()
	r := broker.NewRoom("s")
	a := &sender{t: join(t, r, "la", "A"), freq: 440, amp: 6000}
	e := &ear{}
	d, err := svc.Attach("s", "g1", r, &Output{ID: "out", Owner: "B", Codec: codec.PCMU, Sink: e})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Attach("s", "g2", r, &Output{ID: "out2", Codec: codec.PCMU, Sink: &ear{}}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("a second mixer beyond capacity: %v", err)
	}
	run(a)
	if x := e.heard(); len(x) > 0 && audio.ToneShare(x, 440, 8000) > 0.02 {
		t.Fatalf("group g1 hears the main session's 440 Hz (%.2f)", audio.ToneShare(x, 440, 8000))
	}
	d()
	if n := svc.Count(); n != 0 {
		t.Fatalf("%d mixers after the last output left", n)
	}
}

// FuzzInput: no packet crashes an input; the jitter buffer takes what
// decodes.
func FuzzInput(f *testing.F) {
	f.Add([]byte{0x80, 0, 0, 1, 0, 0, 0, 160, 0, 0, 0, 1, 0xff, 0x7f})
	f.Add([]byte{0x90, 0, 0, 1, 0, 0, 0, 160, 0, 0, 0, 1, 0xbe, 0xde, 0, 1, 1, 2, 3, 4})
	f.Add([]byte{0xa0, 0, 0, 1, 0, 0, 0, 160, 0, 0, 0, 1, 9})
	r := broker.NewRoom("f")
	tr := join(f, r, "l", "A")
	in, err := newInput(tr, codec.PCMU, 3)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in.push(b, time.Now())
		in.pop(time.Now())
	})
}

// TestFramer: packets of 185 samples come out as whole 160-sample frames
// on the first packet's grid, every sample in its place.
func TestFramer(t *testing.T) {
	f := framer{size: 160}
	var got []int16
	var stamps []uint32
	push := func(ts uint32, pcm []int16) {
		stamps = append(stamps, ts)
		got = append(got, pcm...)
	}
	var next int16
	ts := uint32(1 << 31)
	for range 32 {
		pcm := make([]int16, 185)
		for i := range pcm {
			pcm[i] = next
			next++
		}
		f.add(ts, pcm, push)
		ts += 185
	}
	if len(got) != 185*32/160*160 {
		t.Fatalf("%d samples out of %d in", len(got), 185*32)
	}
	for i, v := range got {
		if v != int16(i) {
			t.Fatalf("sample %d is %d", i, v)
		}
	}
	for i, s := range stamps {
		if s != 1<<31+uint32(160*i) {
			t.Fatalf("frame %d at %d", i, s)
		}
	}
}

// TestBeep: a member granted the floor hears a short 1 kHz tone on its
// mixed endpoint; the others do not.
func TestBeep(t *testing.T) {
	svc := NewService(Options{})
	defer svc.Close()
	r := broker.NewRoom("s")
	a := &sender{t: join(t, r, "la", "A"), freq: 440, amp: 3000}
	ears := map[string]*ear{"B": {}, "C": {}}
	for owner, e := range ears {
		d, err := svc.Attach("s", "", r, &Output{ID: "out-" + owner, Owner: owner, Codec: codec.PCMU, Sink: e})
		if err != nil {
			t.Fatal(err)
		}
		defer d()
	}
	for i := range 50 {
		if i == 20 {
			svc.Beep("s", "B")
		}
		a.send()
		time.Sleep(20 * time.Millisecond)
	}
	b, c := ears["B"].heard(), ears["C"].heard()
	if sh := audio.ToneShare(b, 1000, 8000); sh < 0.05 {
		t.Errorf("B, granted the floor, hears 1 kHz at %.3f of its audio", sh)
	}
	if sh := audio.ToneShare(c, 1000, 8000); sh > 0.005 {
		t.Errorf("C hears B's tone (%.3f)", sh)
	}
}
