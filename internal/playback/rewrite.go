package playback

import (
	"encoding/binary"
	"time"
)

// rewriter gives a stream's packets the SSRC, sequence numbers and
// timestamps a receiver sees: continuous across seeks, pauses and speed
// changes (RFC 3550 §5.1: the timestamp runs with the sampling instant,
// the sequence number by one per packet).
type rewriter struct {
	ssrc     uint32
	rate     uint32 // RTP clock rate
	speed    float64
	rebase   bool // the next packet starts a new run
	started  bool
	inSeq0   uint16 // the run's first input sequence number
	inTS0    uint32 // and timestamp
	outSeq0  uint16 // what they became
	outTS0   uint32
	lastSeq  uint16 // the last packet sent
	lastTS   uint32
	lastWall time.Time
}

// cut starts a new run with the next packet (a seek, a pause, a speed
// change): sequence numbers go on by one, the timestamp by the wall time
// that passed.
func (w *rewriter) cut(speed float64) {
	w.rebase = true
	w.speed = speed
}

// rewrite changes b (an RTP packet at least 12 bytes long) in place; now
// is when it is sent.
func (w *rewriter) rewrite(b []byte, now time.Time) {
	seq := binary.BigEndian.Uint16(b[2:])
	ts := binary.BigEndian.Uint32(b[4:])
	if !w.started || w.rebase {
		w.inSeq0, w.inTS0 = seq, ts
		if w.started {
			w.outSeq0 = w.lastSeq + 1
			w.outTS0 = w.lastTS + uint32(now.Sub(w.lastWall).Seconds()*float64(w.rate))
		} else {
			w.outSeq0, w.outTS0 = uint16(w.ssrc>>3), w.ssrc*7 // arbitrary, per stream
		}
		w.started, w.rebase = true, false
	}
	out := w.outSeq0 + (seq - w.inSeq0)
	outTS := w.outTS0 + uint32(int64(float64(int32(ts-w.inTS0))/w.speed))
	binary.BigEndian.PutUint16(b[2:], out)
	binary.BigEndian.PutUint32(b[4:], outTS)
	binary.BigEndian.PutUint32(b[8:], w.ssrc)
	// A recorded packet out of order must not move the run backwards.
	if int16(out-w.lastSeq) > 0 || w.lastWall.IsZero() {
		w.lastSeq, w.lastTS = out, outTS
	}
	w.lastWall = now
}

// synth gives a packet the node made (a stretched frame of ticks) the
// stream's SSRC, the next sequence number and a timestamp ticks after the
// last one's, or after the wall time that passed when a run starts.
func (w *rewriter) synth(b []byte, ticks uint32, now time.Time) {
	var seq uint16
	var ts uint32
	switch {
	case !w.started:
		seq, ts = uint16(w.ssrc>>3), w.ssrc*7
	case w.rebase:
		seq, ts = w.lastSeq+1, w.lastTS+uint32(now.Sub(w.lastWall).Seconds()*float64(w.rate))
	default:
		seq, ts = w.lastSeq+1, w.lastTS+ticks
	}
	w.started, w.rebase = true, false
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], ts)
	binary.BigEndian.PutUint32(b[8:], w.ssrc)
	w.lastSeq, w.lastTS, w.lastWall = seq, ts, now
}
