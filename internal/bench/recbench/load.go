package recbench

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"

	"github.com/convene/convene/internal/bench/rtcbench"
	"github.com/convene/convene/internal/rtctest"
)

// Shape is what a stream sends.
type Shape struct {
	Name    string // "128k", "5M": the report's name
	Title   string
	Video   bool
	Payload int           // bytes of payload in every packet
	Frame   time.Duration // between frames
	// GOP is the packets of each frame, repeating; a video GOP starts
	// with its keyframe.
	GOP   []int
	Clock int // RTP clock rate
}

// Shapes are the benchmark's streams by name.
var Shapes = map[string]Shape{
	"128k": {Name: "128k", Title: "128 kb/s (audio-like: Opus, 50 packets/s × 320 bytes)", Payload: 320, Frame: 20 * time.Millisecond,
		GOP: []int{1}, Clock: 48000},
	"5M": {Name: "5M", Title: "5 Mb/s (video-like: VP8, 30 frames/s of 1,200-byte packets, a 96-packet keyframe every 2 s and 16 packets in every other frame, each frame a burst)",
		Video: true, Payload: 1200, Frame: time.Second / 30, GOP: videoGOP(), Clock: 90000},
}

// videoGOP is 2 s at 30 frames/s: a keyframe of 96 packets, then 59
// frames of 16: 1,040 packets, 520 a second, 4.99 Mb/s of payload.
func videoGOP() []int {
	g := []int{96}
	for range 59 {
		g = append(g, 16)
	}
	return g
}

// PacketsPerSecond is the stream's packet rate.
func (s Shape) PacketsPerSecond() float64 {
	n := 0
	for _, k := range s.GOP {
		n += k
	}
	return float64(n) / (float64(len(s.GOP)) * s.Frame.Seconds())
}

// BitsPerSecond is the stream's payload bit rate.
func (s Shape) BitsPerSecond() float64 { return s.PacketsPerSecond() * float64(s.Payload) * 8 }

// rtpWriter is where a stream's packets go: a publisher's WebRTC track
// (which sets the payload type and SSRC it negotiated), or a plain RTP
// socket (rtpSender).
type rtpWriter interface {
	WriteRTP(*rtp.Packet) error
}

// stream is one publisher's track: the packets the pump writes to it.
// Only its pump worker touches it, except next (read to set windows).
type stream struct {
	id    uint32
	shape *Shape
	track rtpWriter
	close func() // hangs its publisher up
	seq   uint16
	ts    uint32
	frame int
	due   time.Time
	pl    []byte
	// next is the number the next packet will carry: every packet below
	// it was written to the publisher's connection.
	next   atomic.Uint32
	failed atomic.Uint64
}

func newStream(id uint32, shape *Shape, track rtpWriter) *stream {
	s := &stream{id: id, shape: shape, track: track, seq: uint16(rand.Uint32()), ts: rand.Uint32(),
		pl: make([]byte, max(shape.Payload, minPayload(shape.Video)))}
	for i := minPayload(shape.Video); i < len(s.pl); i++ {
		s.pl[i] = byte(i)
	}
	return s
}

// sendFrame writes the stream's next frame, a burst of packets.
func (s *stream) sendFrame() {
	k := s.shape.GOP[s.frame%len(s.shape.GOP)]
	key := s.shape.Video && s.frame%len(s.shape.GOP) == 0
	s.frame++
	for i := range k {
		if s.shape.Video {
			rtctest.VP8Header(s.pl, i == 0, key)
		}
		n := s.next.Load()
		putMark(s.pl, s.shape.Video, s.id, n, time.Now())
		pk := rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: s.seq, Timestamp: s.ts, Marker: i == k-1}, Payload: s.pl}
		if err := s.track.WriteRTP(&pk); err != nil {
			// Not sent: the number goes to the next packet, so that the
			// numbers below next are exactly those sent.
			s.failed.Add(1)
			continue
		}
		s.seq++
		s.next.Store(n + 1)
	}
	s.ts += uint32(s.shape.Frame.Seconds() * float64(s.shape.Clock))
}

// pump sends every stream's frames on time from a few goroutines, each
// owning some streams: it wakes every millisecond and sends the frames
// due. A worker that falls more than behindMax behind a stream's schedule
// skips the frames it missed (the stream sends less than its rate, which
// the step reports as the load's limit, not the server's).
type pump struct {
	mu      sync.Mutex
	pending [][]*stream // by worker: streams to take on
	added   int
	stop    chan struct{}
	wg      sync.WaitGroup
	lagMax  atomic.Int64 // ns, the worst since the last resetLag
	skipped atomic.Uint64
}

const behindMax = 500 * time.Millisecond

func newPump(workers int) *pump {
	p := &pump{pending: make([][]*stream, max(1, workers)), stop: make(chan struct{})}
	for w := range p.pending {
		p.wg.Add(1)
		go p.run(w)
	}
	return p
}

// add starts sending s, at a random phase of its frame interval.
func (p *pump) add(s *stream) {
	s.due = time.Now().Add(time.Duration(rand.Int64N(int64(s.shape.Frame))))
	p.mu.Lock()
	w := p.added % len(p.pending)
	p.added++
	p.pending[w] = append(p.pending[w], s)
	p.mu.Unlock()
}

func (p *pump) close() {
	close(p.stop)
	p.wg.Wait()
}

// resetLag starts measuring the worst lag again and returns the last.
func (p *pump) resetLag() time.Duration { return time.Duration(p.lagMax.Swap(0)) }

func (p *pump) run(w int) {
	defer p.wg.Done()
	var mine []*stream
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		mine = append(mine, p.pending[w]...)
		p.pending[w] = p.pending[w][:0]
		p.mu.Unlock()
		now := time.Now()
		for _, s := range mine {
			for !s.due.After(now) {
				if lag := now.Sub(s.due); lag > behindMax {
					n := uint64(lag / s.shape.Frame)
					p.skipped.Add(n)
					s.frame += int(n)
					s.due = s.due.Add(time.Duration(n) * s.shape.Frame)
					continue
				} else if int64(lag) > p.lagMax.Load() {
					p.lagMax.Store(int64(lag))
				}
				s.sendFrame()
				s.due = s.due.Add(s.shape.Frame)
			}
		}
	}
}

// liveListener is a room's live listener: a member receiving every
// stream (rtctest.Client over WebRTC, plainListener over plain RTP).
type liveListener interface {
	Received() map[string]*rtctest.Recv
	Close()
}

// listeners are the rooms' live listeners: what they received.
type listeners []liveListener

// listen is what the listeners received by a moment: packets, packets
// expected (from the sequence numbers), and one-way latency by ms, to
// each packet's arrival at the listener's socket (arr) and to the
// listener's reading it (read).
type listen struct {
	packets, expected uint64
	arr, read         [rtctest.LatencyBuckets]uint64
}

func (ls listeners) snapshot() listen {
	var s listen
	for _, c := range ls {
		for _, r := range c.Received() {
			s.packets += r.Packets.Load()
			s.expected += uint64(r.High.Load()) // differences count what was sent meanwhile
			for i := range s.arr {
				s.arr[i] += uint64(r.Arrival[i].Load())
				s.read[i] += uint64(r.Latency[i].Load())
			}
		}
	}
	return s
}

// Live is what the listeners measured over a window.
type Live struct {
	Received uint64  `json:"received"`
	Expected uint64  `json:"expected"`
	Loss     float64 `json:"loss"`
	// Late is the packets that arrived later than LateAfter: at the
	// listener's socket (the kernel's receive time), what the server
	// delivered; the latencies are to the same moment.
	Late   uint64  `json:"late"`
	LatP50 float64 `json:"latency_p50_ms"`
	LatP99 float64 `json:"latency_p99_ms"`
	LatMax float64 `json:"latency_max_ms"`
	// ReadLate and ReadP99 are the same to the moment the listener's
	// process read the packet (its WebRTC stack done with it): with the
	// load's own delay in it, on a CPU a few hundred clients share.
	ReadLate uint64  `json:"read_late"`
	ReadP99  float64 `json:"read_latency_p99_ms"`
}

// since is what the listeners received between a and b.
func (b listen) since(a listen) Live {
	l := Live{Received: b.packets - a.packets, Expected: b.expected - a.expected}
	if l.Expected > l.Received {
		l.Loss = float64(l.Expected-l.Received) / float64(l.Expected)
	}
	var h, r [rtctest.LatencyBuckets]uint64
	for i := range h {
		h[i] = b.arr[i] - a.arr[i]
		r[i] = b.read[i] - a.read[i]
		if i >= LateAfter {
			l.Late += h[i]
			l.ReadLate += r[i]
		}
		if h[i] > 0 {
			l.LatMax = float64(i) + 1
		}
	}
	l.LatP50, l.LatP99 = rtcbench.HistPct(h[:], 0.5), rtcbench.HistPct(h[:], 0.99)
	l.ReadP99 = rtcbench.HistPct(r[:], 0.99)
	return l
}
