package relay

import (
	crand "crypto/rand"
	"math/rand/v2"
)

// portPool hands out even ports (RTP; RTCP is port+1) from a range in an
// order a third party cannot guess: a uniformly random free pair, so that
// knowing one call's ports tells nothing about the next call's (issue 11:
// with ports handed out in order, an attacker sent to "the next port" before
// the callee did). A released pair first waits in a first-in first-out
// queue of recently freed pairs, so that stray packets of an ended call are
// unlikely to reach the next one; it goes back into the random draw when
// that queue holds more than a quarter of the range, or when nothing else
// is free. Both steps are O(1). Guarded by Relay.poolMu.
type portPool struct {
	free  []int // drawn from at random; order does not matter
	cool  []int // ring buffer of recently released ports, oldest at head
	head  int
	ncool int
	limit int // pairs held back in cool before they rejoin free
	rnd   *rand.Rand
}

func newPortPool(lo, hi int) *portPool {
	if lo%2 == 1 {
		lo++
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails on Linux (crypto/rand panics otherwise)
	p := &portPool{rnd: rand.New(rand.NewChaCha8(seed))}
	for port := lo; port+1 <= hi; port += 2 {
		p.free = append(p.free, port)
	}
	p.cool = make([]int, len(p.free))
	p.limit = len(p.free) / 4
	return p
}

// get returns a free port, or false.
func (p *portPool) get() (int, bool) {
	if len(p.free) == 0 {
		if p.ncool == 0 {
			return 0, false
		}
		p.thaw()
	}
	i := p.rnd.IntN(len(p.free))
	port := p.free[i]
	last := len(p.free) - 1
	p.free[i] = p.free[last]
	p.free = p.free[:last]
	return port, true
}

// put returns port to the pool, behind the other recently freed ports.
func (p *portPool) put(port int) {
	p.cool[(p.head+p.ncool)%len(p.cool)] = port
	p.ncool++
	for p.ncool > p.limit {
		p.thaw()
	}
}

// thaw moves the oldest recently freed port back into the random draw.
func (p *portPool) thaw() {
	p.free = append(p.free, p.cool[p.head])
	p.head = (p.head + 1) % len(p.cool)
	p.ncool--
}

// available returns the number of free ports.
func (p *portPool) available() int { return len(p.free) + p.ncool }
