package audio

// JitterBuffer reorders one input's decoded frames by RTP timestamp and
// plays them out a fixed number of frames behind the newest, concealing
// the ones that never came: the last frame again, fading by half each
// time, then silence.
type JitterBuffer struct {
	frame   uint32 // samples per frame (timestamp units)
	depth   int    // frames held back before playing
	slots   [][]int16
	have    []bool
	ts      []uint32
	next    uint32 // timestamp of the next frame to play
	ref     uint32 // the timestamp slots are counted from
	newest  uint32
	started bool
	last    []int16
	lost    int // frames concealed in a row
	lateRun int // frames late in a row
	// Counters.
	Played, Concealed, Late, Dropped uint64
	// Resynced counts restarts of the play-out after the buffer ran dry
	// (a sender slower than the mixer) and frames skipped because it ran
	// too full (a faster one).
	Resynced uint64
}

// NewJitterBuffer holds frames of frameSamples samples, playing depth
// frames (at least 1) behind the newest one received.
func NewJitterBuffer(frameSamples, depth int) *JitterBuffer {
	depth = max(1, depth)
	n := 4 * depth
	j := &JitterBuffer{frame: uint32(frameSamples), depth: depth, slots: make([][]int16, n), have: make([]bool, n),
		ts: make([]uint32, n), last: make([]int16, frameSamples)}
	for i := range j.slots {
		j.slots[i] = make([]int16, frameSamples)
	}
	return j
}

// slot places a timestamp by its distance from the first one (ref), so a
// timestamp that wraps past 2^32 keeps its place.
func (j *JitterBuffer) slot(ts uint32) int {
	return int(((ts - j.ref) / j.frame) % uint32(len(j.slots)))
}

// after reports whether timestamp a is after b, across wraps.
func after(a, b uint32) bool { return int32(a-b) > 0 }

// Push stores a decoded frame with its RTP timestamp. A frame older than
// the one playing next is late and dropped; one too far ahead restarts
// the buffer there. Two late in a row mean the sender's clock runs slower
// than the mixer's (the buffer ran dry): play out from there again,
// depth frames behind.
func (j *JitterBuffer) Push(ts uint32, pcm []int16) {
	if !j.started {
		j.started, j.next, j.newest = true, ts-uint32(j.depth-1)*j.frame, ts
		j.ref = j.next
	}
	if after(j.next, ts) {
		j.Late++
		if j.lateRun++; j.lateRun < 2 || j.next-ts >= uint32(len(j.slots))*j.frame {
			return
		}
		j.Resynced++
		j.next, j.newest = ts-uint32(j.depth-1)*j.frame, ts
	}
	j.lateRun = 0
	if ts-j.next >= uint32(len(j.slots))*j.frame { // a jump (a new talk spurt, a restart)
		j.Dropped++
		for i := range j.have {
			j.have[i] = false
		}
		j.next, j.newest = ts-uint32(j.depth-1)*j.frame, ts
		j.ref = j.next
	}
	i := j.slot(ts)
	n := copy(j.slots[i], pcm)
	clear(j.slots[i][n:])
	j.have[i], j.ts[i] = true, ts
	if after(ts, j.newest) {
		j.newest = ts
	}
}

// Pop writes the next frame to play into dst (frameSamples long) and
// reports whether it was concealed rather than received. Before the first
// Push it writes silence.
func (j *JitterBuffer) Pop(dst []int16) (concealed bool) {
	if !j.started {
		clear(dst)
		return true
	}
	// A sender faster than the mixer fills the buffer: skip a frame when
	// it holds three times its depth, so the delay stays bounded.
	if after(j.newest, j.next+uint32(3*j.depth)*j.frame) {
		j.have[j.slot(j.next)] = false
		j.next += j.frame
		j.Resynced++
	}
	i := j.slot(j.next)
	if j.have[i] && j.ts[i] == j.next {
		copy(dst, j.slots[i])
		copy(j.last, dst)
		j.have[i] = false
		j.lost = 0
		j.Played++
	} else {
		j.lost++
		j.Concealed++
		shift := min(j.lost, 16)
		for k := range dst {
			if k < len(j.last) && j.lost <= 3 {
				dst[k] = j.last[k] >> shift
			} else {
				dst[k] = 0
			}
		}
		concealed = true
	}
	j.next += j.frame
	return concealed
}

// Depth is the frames the buffer holds back.
func (j *JitterBuffer) Depth() int { return j.depth }
