package transcode

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/supervise"
)

// ErrNotNeeded is returned for a track that needs no transcoding to Opus
// (it is Opus, or not audio) or whose codec is unknown yet.
var ErrNotNeeded = errors.New("transcode: the track needs no transcoding")

// Source is the codec of an audio track that Opus receivers need
// transcoded: G.711 by its sender's MIME type or its static payload type.
func Source(t *broker.Track) (codec.Spec, bool) {
	if t.Kind() != media.Audio {
		return codec.Spec{}, false
	}
	switch strings.ToLower(t.Info().Codec) {
	case "audio/pcmu":
		return codec.PCMU, true
	case "audio/pcma":
		return codec.PCMA, true
	case "audio/g722":
		return codec.G722, true
	case "":
		pt, ok := t.PayloadType()
		switch {
		case ok && pt == 0:
			return codec.PCMU, true
		case ok && pt == 8:
			return codec.PCMA, true
		case ok && pt == 9:
			return codec.G722, true
		}
	}
	return codec.Spec{}, false
}

// Options configure a Hub.
type Options struct {
	// Supervisor, if set, watches every stream and restarts one that stops.
	Supervisor *supervise.Supervisor
	Metrics    *Metrics
	Logger     *slog.Logger
}

// Hub holds the node's transcoding streams, one per source track.
type Hub struct {
	o       Options
	mu      sync.Mutex
	streams map[*broker.Track]*Stream
}

// NewHub returns a hub with no streams.
func NewHub(o Options) *Hub {
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Hub{o: o, streams: map[*broker.Track]*Stream{}}
}

// ToOpus makes out receive track t of room in Opus (packets of payload
// type 111, 48 kHz, 20 ms; from is t). Stop with the returned function.
func (h *Hub) ToOpus(room *broker.Room, t *broker.Track, out broker.Sink) (stop func(), err error) {
	src, ok := Source(t)
	if !ok {
		return nil, ErrNotNeeded
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streams[t]
	if s == nil {
		if s, err = h.start(room, t, src); err != nil {
			return nil, err
		}
		h.streams[t] = s
		h.o.Metrics.streams.Inc()
	}
	// A receiver is keyed by an entry of its own: sinks need not be
	// comparable (a SinkFunc is not).
	r := &receiver{out}
	s.outs[r] = true
	s.publish()
	var once sync.Once
	return func() { once.Do(func() { h.remove(t, s, r) }) }, nil
}

// receiver is one ToOpus call's output.
type receiver struct{ sink broker.Sink }

func (h *Hub) remove(t *broker.Track, s *Stream, r *receiver) {
	h.mu.Lock()
	delete(s.outs, r)
	s.publish()
	last := len(s.outs) == 0 && h.streams[t] == s
	if last {
		delete(h.streams, t)
	}
	h.mu.Unlock()
	if last {
		s.close()
		h.o.Metrics.streams.Dec()
	}
}

// Count is how many streams run now.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.streams)
}

// Close stops every stream.
func (h *Hub) Close() {
	h.mu.Lock()
	ss := h.streams
	h.streams = map[*broker.Track]*Stream{}
	h.mu.Unlock()
	for _, s := range ss {
		s.close()
		h.o.Metrics.streams.Dec()
	}
}

// Crash makes the stream of t crash as a bug would (fault injection for
// tests and drills); it reports whether t has a stream.
func (h *Hub) Crash(t *broker.Track) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streams[t]
	if s != nil {
		s.crash.Store(true)
	}
	return s != nil
}

// Stream is one source track transcoded to Opus.
type Stream struct {
	h       *Hub
	id      string
	track   *broker.Track
	src     codec.Spec
	in      chan *media.Packet
	outs    map[*receiver]bool            // under h.mu
	sinks   atomic.Pointer[[]broker.Sink] // copy of outs for the goroutine
	untap   func()
	gen     atomic.Pointer[worker] // the goroutine serving now
	crash   atomic.Bool
	beats   atomic.Uint64
	load    atomic.Uint64 // float64 bits: share of a core, smoothed
	unwatch func()
	stop    chan struct{}
}

// queue bounds the packets waiting for the stream's goroutine.
const queue = 64

func (h *Hub) start(room *broker.Room, t *broker.Track, src codec.Spec) (*Stream, error) {
	s := &Stream{h: h, id: "transcode:" + room.ID() + "/" + t.ID(), track: t, src: src,
		in: make(chan *media.Packet, queue), outs: map[*receiver]bool{}, stop: make(chan struct{})}
	s.sinks.Store(&[]broker.Sink{})
	if err := s.spawn(); err != nil {
		return nil, err
	}
	s.untap = room.Tap(t, s.id, broker.SinkFunc(s.deliver))
	if h.o.Supervisor != nil {
		s.unwatch = h.o.Supervisor.Add("transcoder", s.id, s.status, s.restart)
	}
	return s, nil
}

// publish copies the outputs for the goroutine (under h.mu).
func (s *Stream) publish() {
	l := make([]broker.Sink, 0, len(s.outs))
	for r := range s.outs {
		l = append(l, r.sink)
	}
	s.sinks.Store(&l)
}

// deliver queues a packet of the source track; it never blocks.
func (s *Stream) deliver(pk *media.Packet, _ *broker.Track) {
	select {
	case s.in <- pk:
	default:
		s.h.o.Metrics.dropped.WithLabelValues("queue_full").Inc()
		pk.Release()
	}
}

func (s *Stream) close() {
	if s.unwatch != nil {
		s.unwatch()
	}
	s.untap()
	close(s.stop)
}

func (s *Stream) status() supervise.Status {
	return supervise.Status{Kind: "transcoder", ID: s.id, Beats: s.beats.Load(),
		Load: math.Float64frombits(s.load.Load()), Inputs: 1, Outputs: len(*s.sinks.Load())}
}

// restart starts a fresh goroutine (new codec state) in place of one
// that stopped beating; the old one, if it ever wakes, sends nothing.
func (s *Stream) restart() {
	select {
	case <-s.stop:
		return
	default:
	}
	if err := s.spawn(); err != nil {
		s.h.o.Logger.Error("transcoder restart failed; the supervisor tries again", "stream", s.id, "err", err)
		return
	}
	s.h.o.Metrics.restarts.Inc()
	s.h.o.Logger.Info("transcoder restarted", "stream", s.id)
}

// worker is one goroutine's codec state.
type worker struct {
	s    *Stream
	dec  codec.Decoder
	enc  codec.Encoder
	rs   *audio.Resampler
	pcm  []int16 // decoded
	up   []int16 // resampled
	buf  []int16 // 48 kHz samples not yet framed
	next uint32  // the source timestamp the buffer's end stands for
	ts   uint32  // the Opus timestamp of the buffer's start
	seq  uint16
	ssrc uint32
	have bool
}

func (s *Stream) spawn() error {
	dec, err := codec.NewDecoder(s.src)
	if err != nil {
		return err
	}
	enc, err := codec.NewEncoder(codec.Opus)
	if err != nil {
		return err
	}
	rs, err := audio.NewResampler(s.src.Rate, 48000)
	if err != nil {
		return err
	}
	w := &worker{s: s, dec: dec, enc: enc, rs: rs, pcm: make([]int16, 2048), up: make([]int16, 2048*6+1),
		seq: uint16(rand.Uint32()), ssrc: rand.Uint32()}
	s.gen.Store(w)
	go w.run()
	return nil
}

func (w *worker) run() {
	s := w.s
	defer func() {
		if v := recover(); v != nil {
			s.h.o.Metrics.crashes.Inc()
			s.h.o.Logger.Error("transcoder crashed", "stream", s.id, "panic", v)
		}
	}()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var busy time.Duration
	for s.gen.Load() == w {
		select {
		case pk := <-s.in:
			if s.crash.CompareAndSwap(true, false) {
				pk.Release()
				panic("transcode: crash injected")
			}
			start := time.Now()
			w.packet(pk.Bytes())
			pk.Release()
			busy += time.Since(start)
		case <-t.C:
			s.beats.Add(1)
			load := 0.8*math.Float64frombits(s.load.Load()) + 0.2*busy.Seconds()/0.1
			s.load.Store(math.Float64bits(load))
			busy = 0
		case <-s.stop:
			return
		}
	}
}

// packet decodes one source packet and sends the whole 20 ms Opus frames
// it completes.
func (w *worker) packet(b []byte) {
	m := w.s.h.o.Metrics
	if len(b) < 12 || b[0]>>6 != 2 || b[1]&0x7f != w.s.src.PT {
		m.dropped.WithLabelValues("not_source").Inc()
		return
	}
	off, ok := media.PayloadOffset(b)
	if !ok || off >= len(b) || len(b)-off > len(w.pcm) {
		m.dropped.WithLabelValues("malformed").Inc()
		return
	}
	ts := binary.BigEndian.Uint32(b[4:])
	n, err := w.dec.Decode(b[off:], w.pcm)
	if err != nil || n == 0 {
		m.dropped.WithLabelValues("undecodable").Inc()
		return
	}
	ratio := uint32(48000 / w.s.src.RTPClock())
	if !w.have || ts != w.next {
		// The first packet, or a gap or jump (silence, loss): a fresh
		// frame grid from here.
		w.buf, w.have = w.buf[:0], true
		w.ts = ts * ratio
	}
	w.next = ts + uint32(n*w.s.src.RTPClock()/w.s.src.Rate) // clock ticks (G.722: half its samples)
	k := w.rs.Resample(w.up, w.pcm[:n])
	w.buf = append(w.buf, w.up[:k]...)
	for len(w.buf) >= 960 {
		w.send(w.buf[:960])
		w.buf = w.buf[:copy(w.buf, w.buf[960:])]
		w.ts += 960
	}
}

func (w *worker) send(frame []int16) {
	pk := media.NewPacket()
	buf := pk.Buffer()
	buf[0], buf[1] = 0x80, codec.Opus.PT
	binary.BigEndian.PutUint16(buf[2:], w.seq)
	binary.BigEndian.PutUint32(buf[4:], w.ts)
	binary.BigEndian.PutUint32(buf[8:], w.ssrc)
	n, err := w.enc.Encode(frame, buf[12:])
	if err != nil {
		pk.Release()
		w.s.h.o.Metrics.dropped.WithLabelValues("encode").Inc()
		return
	}
	w.seq++
	pk.SetLen(12 + n)
	pk.Kind = media.Audio
	sinks := *w.s.sinks.Load()
	if len(sinks) == 0 || w.s.gen.Load() != w {
		pk.Release()
		return
	}
	w.s.h.o.Metrics.frames.Inc()
	pk.Retain(len(sinks) - 1)
	for _, o := range sinks {
		o.Deliver(pk, w.s.track)
	}
}

// Metrics are the transcoders' Prometheus collectors.
type Metrics struct {
	streams  prometheus.Gauge
	frames   prometheus.Counter
	dropped  *prometheus.CounterVec
	crashes  prometheus.Counter
	restarts prometheus.Counter
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convene_transcoders",
			Help: "Tracks transcoded now (a phone's G.711 as Opus for browsers)."}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_transcoder_frames_total",
			Help: "20 ms Opus frames encoded by transcoders (each shared by every receiver of the stream)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_transcoder_dropped_packets_total",
			Help: "Source packets a transcoder could not use, by reason."}, []string{"reason"}),
		crashes: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_transcoder_crashes_total",
			Help: "Transcoder goroutines that panicked (each is restarted by the supervisor)."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_transcoder_restarts_total",
			Help: "Transcoder goroutines replaced because they stopped beating."}),
	}
}

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.streams, m.frames, m.dropped, m.crashes, m.restarts)
}
