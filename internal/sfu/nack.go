package sfu

// nackLog is one received stream's record of which of its last
// nackWindow sequence numbers arrived, for the NACKs feedback sends: a
// packet missing from the window is asked for again every feedback
// interval until it arrives, falls out of the window or was asked for
// nackTries times (a packet the sender no longer holds is not asked for
// forever). Not safe for concurrent use: feedback guards it.
type nackLog struct {
	got     [nackWindow / 64]uint64 // a bit per sequence number, by seq % nackWindow
	tries   [nackWindow]uint8       // NACKs sent for the number in each slot
	top     uint16                  // the highest sequence number received
	span    int                     // numbers the window covers up to top (none before the first received)
	started bool
}

const (
	nackWindow = 512 // as pion's NACK generator's default
	nackTries  = 10  // as libwebrtc's
)

func (l *nackLog) slot(seq uint16) int { return int(seq) % nackWindow }

func (l *nackLog) mark(seq uint16) {
	i := l.slot(seq)
	l.got[i/64] |= 1 << (i % 64)
}

func (l *nackLog) unmark(seq uint16) {
	i := l.slot(seq)
	l.got[i/64] &^= 1 << (i % 64)
	l.tries[i] = 0
}

func (l *nackLog) has(seq uint16) bool {
	i := l.slot(seq)
	return l.got[i/64]&(1<<(i%64)) != 0
}

// reset starts the window again at seq (the first packet, or one so far
// from the rest that the stream must have started anew).
func (l *nackLog) reset(seq uint16) {
	l.got = [nackWindow / 64]uint64{}
	l.tries = [nackWindow]uint8{}
	l.top, l.span, l.started = seq, 1, true
	l.mark(seq)
}

// add records that seq arrived.
func (l *nackLog) add(seq uint16) {
	if !l.started {
		l.reset(seq)
		return
	}
	d := int(int16(seq - l.top))
	switch {
	case d > 0 && d < nackWindow:
		for s := l.top + 1; s != seq; s++ {
			l.unmark(s)
		}
		l.unmark(seq)
		l.mark(seq)
		l.top = seq
		l.span = min(nackWindow, l.span+d)
	case d >= nackWindow || -d >= nackWindow:
		l.reset(seq)
	case -d < l.span:
		l.mark(seq) // late, or a retransmission
	}
}

// missing appends to dst the numbers in the window that have not arrived
// and are still worth asking for, oldest first, and counts the ask.
func (l *nackLog) missing(dst []uint16) []uint16 {
	for i := l.span - 1; i > 0; i-- {
		s := l.top - uint16(i)
		if l.has(s) {
			continue
		}
		if k := l.slot(s); l.tries[k] < nackTries {
			l.tries[k]++
			dst = append(dst, s)
		}
	}
	return dst
}
