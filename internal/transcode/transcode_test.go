package transcode

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
	"github.com/convene/convene/internal/supervise"
	"github.com/convene/convene/internal/testutil"
)

// phone publishes a PCMU tone in packets of n samples.
type phone struct {
	t     *broker.Track
	phase float64
	seq   uint16
	ts    uint32
}

func (p *phone) send(n int) {
	pcm := make([]int16, n)
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(p.phase))
		p.phase += 2 * math.Pi * 440 / 8000
	}
	pk := media.NewPacket()
	b := pk.Buffer()
	b[0], b[1] = 0x80, 0
	binary.BigEndian.PutUint16(b[2:], p.seq)
	binary.BigEndian.PutUint32(b[4:], p.ts)
	binary.BigEndian.PutUint32(b[8:], 42)
	audio.EncodeMulaw(b[12:], pcm)
	pk.SetLen(12 + n)
	p.seq++
	p.ts += uint32(n)
	p.t.Publish(pk)
}

// browser decodes the Opus it receives.
type browser struct {
	mu   sync.Mutex
	dec  codec.Decoder
	pcm  []int16
	n    int
	last uint16
	from *broker.Track
}

func newBrowser(t *testing.T) *browser {
	d, err := codec.NewDecoder(codec.Opus)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{dec: d}
}

func (b *browser) Deliver(pk *media.Packet, from *broker.Track) {
	defer pk.Release()
	b.mu.Lock()
	defer b.mu.Unlock()
	raw := pk.Bytes()
	if raw[1]&0x7f != 111 {
		return
	}
	out := make([]int16, 5760)
	n, err := b.dec.Decode(raw[12:], out)
	if err != nil {
		return
	}
	b.n++
	b.from = from
	b.pcm = append(b.pcm, out[:n]...)
}

func (b *browser) packets() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *browser) source() *broker.Track {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.from
}

func (b *browser) heard() []int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int16(nil), b.pcm...)
}

// TestPhoneReachesBrowsersInOpus: a plain RTP phone's PCMU (in packets
// of 30 ms, not 20) reaches two receivers as 20 ms Opus frames, encoded
// once for both; the tone survives; an Opus track needs no transcoding.
func TestPhoneReachesBrowsersInOpus(t *testing.T) {
	m := NewMetrics()
	h := NewHub(Options{Metrics: m})
	defer h.Close()
	r := broker.NewRoom("s")
	tr, err := r.Join(broker.Member{ID: "phone", Kind: media.Audio, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	p := &phone{t: tr}
	p.send(240) // the first packet tells the payload type
	a, b := newBrowser(t), newBrowser(t)
	stopA, err := h.ToOpus(r, tr, a)
	if err != nil {
		t.Fatal(err)
	}
	stopB, err := h.ToOpus(r, tr, broker.SinkFunc(b.Deliver)) // a sink need not be comparable
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 1 {
		t.Fatalf("%d streams for one track", h.Count())
	}
	for i := range 100 { // 3 s of audio, faster than real time
		p.send(240)
		time.Sleep(time.Millisecond)
		if i%10 == 9 {
			// Paced by the transcoder, not the clock: its queue holds 64
			// packets and drops (counted) past that, so a sender faster
			// than a starved transcoder (-race on a loaded machine) would
			// lose packets it means to test, not the transcoder's.
			want := float64((i+1)*30/20 - 2)
			testutil.WaitFor(t, 10*time.Second, "the transcoder to catch up", func() bool { return promtest.ToFloat64(m.frames) >= want })
		}
	}
	if d := promtest.ToFloat64(m.dropped.WithLabelValues("queue_full")); d != 0 {
		t.Errorf("%v packets dropped on a full queue", d)
	}
	testutil.WaitFor(t, 10*time.Second, "the second browser's 3 s of Opus", func() bool { return b.packets() >= 149 })
	if got := promtest.ToFloat64(m.frames); got < 149 || got > 151 {
		t.Errorf("%v frames encoded for 3 s of audio and two receivers, want 150", got)
	}
	x := a.heard()
	if sh := audio.ToneShare(x[len(x)/2:], 440, 48000); sh < 0.5 {
		t.Errorf("the browser hears 440 Hz at %.2f of the energy", sh)
	}
	if from := a.source(); from != tr {
		t.Errorf("packets come from %v, want the phone's track", from)
	}
	stopA()
	stopB()
	if h.Count() != 0 {
		t.Fatalf("%d streams after the last receiver left", h.Count())
	}
	opus, err := r.Join(broker.Member{ID: "browser", Kind: media.Audio, Sends: true, Info: broker.TrackInfo{Codec: "audio/opus"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ToOpus(r, opus, a); !errors.Is(err, ErrNotNeeded) {
		t.Errorf("an Opus track: %v, want ErrNotNeeded", err)
	}
}

// TestWidebandPhoneReachesBrowsers: a G.722 phone (16 kHz audio on an
// 8 kHz RTP clock) reaches a browser as Opus with its 6 kHz tone, which
// only a wideband path carries, at the right pace (50 frames a second).
func TestWidebandPhoneReachesBrowsers(t *testing.T) {
	h := NewHub(Options{})
	defer h.Close()
	r := broker.NewRoom("s")
	tr, _ := r.Join(broker.Member{ID: "phone", Kind: media.Audio, Sends: true, Info: broker.TrackInfo{Codec: "audio/G722"}})
	enc, err := codec.NewEncoder(codec.G722)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	stop, err := h.ToOpus(r, tr, b)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var phase float64
	for i := range 100 { // 2 s
		pcm := make([]int16, 320)
		for j := range pcm {
			pcm[j] = int16(8000 * math.Sin(phase))
			phase += 2 * math.Pi * 6000 / 16000
		}
		pk := media.NewPacket()
		buf := pk.Buffer()
		buf[0], buf[1] = 0x80, 9
		binary.BigEndian.PutUint16(buf[2:], uint16(i))
		binary.BigEndian.PutUint32(buf[4:], uint32(i*160))
		binary.BigEndian.PutUint32(buf[8:], 7)
		n, _ := enc.Encode(pcm, buf[12:])
		pk.SetLen(12 + n)
		tr.Publish(pk)
		time.Sleep(time.Millisecond)
	}
	testutil.WaitFor(t, 10*time.Second, "2 s of the wideband phone as Opus", func() bool { return b.packets() >= 99 })
	x := b.heard()
	if sh := audio.ToneShare(x[len(x)/2:], 6000, 48000); sh < 0.5 {
		t.Errorf("the browser hears 6 kHz at %.2f of the energy", sh)
	}
	if got := len(x); got < 99*960 || got > 101*960 {
		t.Errorf("2 s of G.722 became %d samples at 48 kHz, want 96,000", got)
	}
}

// TestCrashedTranscoderIsRestarted: the stream's goroutine panics; the
// supervisor starts a fresh one and the receiver hears Opus again.
func TestCrashedTranscoderIsRestarted(t *testing.T) {
	sup, err := supervise.New(supervise.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	m := NewMetrics()
	h := NewHub(Options{Metrics: m, Supervisor: sup})
	defer h.Close()
	r := broker.NewRoom("s")
	tr, _ := r.Join(broker.Member{ID: "phone", Kind: media.Audio, Sends: true, Info: broker.TrackInfo{Codec: "audio/PCMU"}})
	p := &phone{t: tr}
	a := newBrowser(t)
	stop, err := h.ToOpus(r, tr, a)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				p.send(160)
			}
		}
	}()
	testutil.WaitFor(t, 10*time.Second, "Opus before the crash", func() bool { return a.packets() >= 10 })
	h.Crash(tr)
	testutil.WaitFor(t, 10*time.Second, "the supervisor's restart", func() bool { return promtest.ToFloat64(m.restarts) == 1 })
	n := a.packets()
	testutil.WaitFor(t, 10*time.Second, "Opus after the restart", func() bool { return a.packets() >= n+10 })
	if promtest.ToFloat64(m.crashes) != 1 {
		t.Errorf("crashes %v", promtest.ToFloat64(m.crashes))
	}
}
