package mixer

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/media"
)

const (
	frame     = 20 * time.Millisecond
	idleAfter = 200 * time.Millisecond // an input without packets this long is not mixed
	// A speaker keeps its place until quiet this many ticks in a row...
	holdTicks = 25
	// ...or a louder input beats it by this many dB.
	overtakeDB = 6
	// Below this smoothed loudness (127 - dBov) an input is not speaking:
	// quieter than -60 dBov.
	speakingLoudness = 127 - 60
)

type dropReason int

const (
	dropNone dropReason = iota
	dropMalformed
	dropPayloadType
	dropUndecodable
	dropUnknownCodec
)

var dropNames = [...]string{"", "malformed", "payload_type", "undecodable", "unknown_codec"}

// Output is an endpoint that hears the mix: what the active speakers say,
// without its owner's own voice, in its codec.
type Output struct {
	ID    string
	Owner string // session member ("" for none): never hears itself
	Codec codec.Spec
	Sink  broker.Sink // takes the mix's RTP packets (a reference each)

	own coder // the mixer's goroutine's own: this output's mix-minus
	// beep is how many more frames carry the floor-granted tone (under mu).
	beep      int
	beepPhase float64
}

// coder encodes a mix for one codec, resampling it from the mixing rate.
type coder struct {
	enc  codec.Encoder
	rs   *audio.Resampler
	from int // the mixing rate rs converts from
	out  []int16
}

// Mixer mixes one subgroup of a session's room.
type Mixer struct {
	id, session, group string
	room               *broker.Room
	o                  *Options
	fallback           atomic.Pointer[codec.Spec] // the codec of inputs that do not say

	inputs atomic.Pointer[map[*broker.Track]*input] // copy on write under mu
	mu     sync.Mutex
	outs   map[string]*Output

	// The tick's own.
	speakers []*input
	rate     int
	seq      uint16
	ticks    uint32
	ssrc     uint32
	sum      []int32
	mixed    []int16
	shared   map[codec.Spec]*coder // the full mix's, per codec
	packets  map[sharedKey]*media.Packet
	changed  atomic.Bool

	// For the supervisor: beats counts ticks; load is the tick's smoothed
	// share of its 20 ms (float64 bits); dead is set once the mixer is
	// replaced, so a hung tick that wakes up sends nothing.
	beats atomic.Uint64
	load  atomic.Uint64
	dead  atomic.Bool
	crash atomic.Bool // fault injection: the next tick panics

	stop, done chan struct{}
}

type sharedKey struct {
	owner string // "" for the full mix
	spec  codec.Spec
}

func newMixer(id, session, group string, room *broker.Room, o *Options) (*Mixer, error) {
	m := &Mixer{id: id, session: session, group: group, room: room, o: o, outs: map[string]*Output{}, rate: 8000,
		ssrc: rand.Uint32(), seq: uint16(rand.Uint32()), shared: map[codec.Spec]*coder{},
		packets: map[sharedKey]*media.Packet{}, stop: make(chan struct{}), done: make(chan struct{})}
	m.inputs.Store(&map[*broker.Track]*input{})
	if _, err := room.Join(broker.Member{ID: id, Kind: media.Audio, Receives: true, Sink: m, Group: group,
		OnChange: func() { m.changed.Store(true) }}); err != nil {
		return nil, err
	}
	go m.run()
	return m, nil
}

// Deliver decodes a packet of one of the group's tracks into its input.
// It runs on the sender's goroutine and never blocks on the tick.
func (m *Mixer) Deliver(pk *media.Packet, from *broker.Track) {
	defer pk.Release()
	in := (*m.inputs.Load())[from]
	if in == nil {
		var r dropReason
		if in, r = m.addInput(from); in == nil {
			m.o.Metrics.drop(r)
			return
		}
	}
	if r := in.push(pk.Bytes(), time.Now()); r != dropNone {
		m.o.Metrics.drop(r)
	}
}

func (m *Mixer) addInput(t *broker.Track) (*input, dropReason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.inputs.Load()
	if in := cur[t]; in != nil {
		return in, dropNone
	}
	var fb codec.Spec
	if p := m.fallback.Load(); p != nil {
		fb = *p
	}
	spec, ok := specOf(t, fb)
	if !ok {
		return nil, dropUnknownCodec
	}
	in, err := newInput(t, spec, m.o.Depth)
	if err != nil {
		return nil, dropUnknownCodec
	}

	next := make(map[*broker.Track]*input, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[t] = in
	m.inputs.Store(&next)
	return in, dropNone
}

// add attaches an output.
func (m *Mixer) add(o *Output) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outs[o.ID] = o
	if o.Codec.Name == "L16" || o.Codec.PT >= 96 {
		spec := o.Codec
		m.fallback.Store(&spec) // an endpoint's dynamic payload type names its own codec
	}
}

// remove detaches an output and reports how many remain.
func (m *Mixer) remove(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.outs, id)
	return len(m.outs)
}

// close stops the mixer; one whose tick hangs is abandoned after a second.
func (m *Mixer) close() {
	close(m.stop)
	select {
	case <-m.done:
	case <-time.After(time.Second):
		m.dead.Store(true)
	}
	m.room.Leave(m.id)
}

// abandon stops a mixer that may be hung, without waiting for it.
func (m *Mixer) abandon() {
	m.dead.Store(true)
	close(m.stop)
	m.room.Leave(m.id)
}

// Load is the share of a core the mixer's ticks use, smoothed.
func (m *Mixer) Load() float64 { return math.Float64frombits(m.load.Load()) }

func (m *Mixer) run() {
	defer close(m.done)
	defer func() {
		// A tick that panics stops this mixer, not the node: its beats
		// stop and the supervisor starts another.
		if v := recover(); v != nil {
			m.o.Metrics.panics.Inc()
			m.o.Logger.Error("mixer crashed", "session", m.session, "group", m.group, "panic", v)
		}
	}()
	t := time.NewTicker(frame)
	defer t.Stop()
	next := time.Now().Add(frame) // when the next frame is due
	for {
		select {
		case <-t.C:
			// One tick per frame due, however late the ticker woke this
			// goroutine (the ticker drops what it could not deliver): a
			// frame left out would be a hole in every output and, since
			// the timestamps count ticks, would shift every later frame
			// 20 ms behind its place. Frames due up to half a frame from
			// now are made now; a buffered wake-up ahead of time makes none.
			for made := 0; ; made++ {
				tick, skip := owed(time.Now(), next, made)
				if skip > 0 {
					m.o.Metrics.lateTicks.Add(float64(skip))
					m.skip(uint32(skip))
					next = next.Add(time.Duration(skip) * frame)
				}
				if !tick {
					break
				}
				if m.crash.Load() {
					panic("mixer: crash injected")
				}
				start := time.Now()
				m.tick(start)
				took := time.Since(start)
				m.o.Metrics.tick(time.Since(next), took)
				m.beats.Add(1)
				load := 0.95*m.Load() + 0.05*took.Seconds()/frame.Seconds()
				m.load.Store(math.Float64bits(load))
				next = next.Add(frame)
			}
		case <-m.stop:
			return
		}
	}
}

// maxCatchUp is how many late frames a mixer makes at once before it skips
// the rest (100 ms: what a jitter buffer at the far end can absorb).
const maxCatchUp = 5

// owed says what a mixer does at now when its next frame is due at next
// and it has made made frames since it woke: make a frame when it is due
// (or due within half a frame), or wait; once it has made maxCatchUp and
// is still behind, skip the frames due so far instead of making them.
func owed(now, next time.Time, made int) (tick bool, skip int) {
	if now.Before(next.Add(-frame / 2)) {
		return false, 0
	}
	if made < maxCatchUp {
		return true, 0
	}
	return false, int(now.Sub(next)/frame) + 1
}

// skip leaves n frames out of every output, advancing the timestamps.
func (m *Mixer) skip(n uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ticks += n
}

// tick mixes one 20 ms frame and sends it to every output.
func (m *Mixer) tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed.Swap(false) {
		m.prune()
	}
	ins := *m.inputs.Load()
	rate := 8000
	for _, in := range ins {
		rate = max(rate, in.spec.Rate)
	}
	for _, o := range m.outs {
		rate = max(rate, o.Codec.Rate)
	}
	rate = rateFor(rate)
	m.rate = rate
	n := rate / 50
	var active []*input
	for _, in := range ins {
		if !in.pop(now) {
			in.loud, in.quiet = 0, holdTicks
			continue
		}
		in.toRate(rate)
		level := 127 - float64(audio.Level(in.frame))
		in.loud = 0.7*in.loud + 0.3*level
		if in.loud < speakingLoudness {
			in.quiet++
		} else {
			in.quiet = 0
		}
		active = append(active, in)
	}
	m.chooseSpeakers(active)
	if len(m.sum) != n {
		m.sum, m.mixed = make([]int32, n), make([]int16, n)
	}
	clear(m.sum)
	for _, sp := range m.speakers {
		for i, s := range sp.frame {
			m.sum[i] += int32(s)
		}
	}
	m.send()
	m.seq++
	m.ticks++
}

// rateFor rounds a codec's rate up to a mixing rate.
func rateFor(r int) int {
	switch {
	case r <= 8000:
		return 8000
	case r <= 16000:
		return 16000
	}
	return 48000
}

// chooseSpeakers keeps the K loudest active inputs as speakers, with
// hysteresis: a speaker stays until quiet for holdTicks or overtaken by
// overtakeDB; the speaker set reaches OnSpeakers when it changes.
func (m *Mixer) chooseSpeakers(active []*input) {
	k := m.o.Speakers
	before := m.speakerOwners()
	var keep []*input
	for _, sp := range m.speakers {
		if slices.Contains(active, sp) && sp.quiet < holdTicks {
			keep = append(keep, sp)
		} else {
			sp.speaking = false
		}
	}
	var cands []*input
	for _, in := range active {
		if !in.speaking && in.quiet == 0 {
			cands = append(cands, in)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].loud > cands[j].loud })
	for _, c := range cands {
		if len(keep) < k {
			c.speaking = true
			keep = append(keep, c)
			continue
		}
		weakest := 0
		for i, sp := range keep {
			if sp.loud < keep[weakest].loud {
				weakest = i
			}
		}
		if c.loud >= keep[weakest].loud+overtakeDB {
			keep[weakest].speaking = false
			c.speaking = true
			keep[weakest] = c
		}
	}
	m.speakers = keep
	if after := m.speakerOwners(); m.o.OnSpeakers != nil && !slices.Equal(before, after) {
		m.o.OnSpeakers(m.session, m.group, after)
	}
}

func (m *Mixer) speakerOwners() []string {
	var s []string
	for _, sp := range m.speakers {
		id := sp.owner
		if id == "" {
			id = sp.track.ID()
		}
		if !slices.Contains(s, id) {
			s = append(s, id)
		}
	}
	sort.Strings(s)
	return s
}

// prune drops the inputs of tracks the mixer no longer receives.
func (m *Mixer) prune() {
	subscribed := map[*broker.Track]bool{}
	for _, t := range m.room.Subscribed(m.id) {
		subscribed[t] = true
	}
	cur := *m.inputs.Load()
	next := make(map[*broker.Track]*input, len(cur))
	for t, in := range cur {
		if subscribed[t] {
			next[t] = in
		} else {
			in.speaking = false
		}
	}
	m.inputs.Store(&next)
	m.speakers = slices.DeleteFunc(m.speakers, func(in *input) bool { return !subscribed[in.track] })
}

// send encodes and delivers the frame: one shared packet per codec for
// the outputs that hear the full mix, one per speaking output.
func (m *Mixer) send() {
	for k, pk := range m.packets {
		pk.Release()
		delete(m.packets, k)
	}
	for _, o := range m.outs {
		key := sharedKey{spec: o.Codec}
		var own []*input
		for _, sp := range m.speakers {
			if o.Owner != "" && sp.owner == o.Owner {
				own = append(own, sp)
			}
		}
		if len(own) > 0 || o.beep > 0 {
			key.owner = o.ID
		}
		pk := m.packets[key]
		if pk == nil {
			pk = m.encode(o, own)
			if pk == nil {
				continue
			}
			m.packets[key] = pk
		}
		if m.dead.Load() {
			return
		}
		pk.Retain(1)
		o.Sink.Deliver(pk, nil)
	}
}

// encode makes the packet of o's mix: the full mix, or without own.
func (m *Mixer) encode(o *Output, own []*input) *media.Packet {
	beeping := o.beep > 0
	step := 2 * math.Pi * beepHz / float64(m.rate)
	for i, v := range m.sum {
		for _, sp := range own {
			v -= int32(sp.frame[i])
		}
		if beeping {
			v += int32(beepAmp * math.Sin(o.beepPhase))
			o.beepPhase += step
		}
		m.mixed[i] = audio.Sat16(v)
	}
	if beeping {
		o.beep--
	}
	c := &o.own
	if len(own) == 0 && !beeping {
		if c = m.shared[o.Codec]; c == nil {
			c = &coder{}
			m.shared[o.Codec] = c
		}
	}
	if c.enc == nil {
		e, err := codec.NewEncoder(o.Codec)
		if err != nil {
			m.o.Metrics.drop(dropUnknownCodec)
			return nil
		}
		c.enc = e
	}
	pcm := m.mixed
	if o.Codec.Rate != m.rate {
		if c.rs == nil || c.from != m.rate {
			c.rs, _ = audio.NewResampler(m.rate, o.Codec.Rate)
			c.from = m.rate
			c.out = make([]int16, o.Codec.FrameSamples()+1)
		}
		if c.rs == nil {
			return nil
		}
		k := c.rs.Resample(c.out, pcm)
		pcm = c.out[:min(k, o.Codec.FrameSamples())]
	}
	pk := media.NewPacket()
	buf := pk.Buffer()
	buf[0], buf[1] = 0x80, o.Codec.PT&0x7f
	binary.BigEndian.PutUint16(buf[2:], m.seq)
	binary.BigEndian.PutUint32(buf[4:], m.ticks*uint32(o.Codec.FrameTicks()))
	binary.BigEndian.PutUint32(buf[8:], m.ssrc)
	n, err := c.enc.Encode(pcm, buf[12:])
	if err != nil {
		pk.Release()
		m.o.Metrics.drop(dropUndecodable)
		return nil
	}
	pk.SetLen(12 + n)
	pk.Kind = media.Audio
	m.o.Metrics.frames.Inc()
	return pk
}

// The floor-granted tone: 200 ms of 1 kHz at -18 dBFS.
const (
	beepHz     = 1000
	beepAmp    = 4000
	beepFrames = 10
)

// beep makes member's outputs hear the floor-granted tone.
func (m *Mixer) beep(member string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.outs {
		if o.Owner == member && member != "" {
			o.beep, o.beepPhase = beepFrames, 0
			n++
		}
	}
	return n
}
