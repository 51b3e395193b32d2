package relay

// portPool hands out even ports (RTP; RTCP is port+1) from a range, first in
// first out, so a released port is reused as late as possible and stray
// packets of an ended call are unlikely to reach the next one. Guarded by
// Relay.mu.
type portPool struct {
	free []int // ring buffer
	head int
	n    int
}

func newPortPool(lo, hi int) *portPool {
	if lo%2 == 1 {
		lo++
	}
	p := &portPool{}
	for port := lo; port+1 <= hi; port += 2 {
		p.free = append(p.free, port)
	}
	p.n = len(p.free)
	return p
}

// get returns a free port, or false.
func (p *portPool) get() (int, bool) {
	if p.n == 0 {
		return 0, false
	}
	port := p.free[p.head]
	p.head = (p.head + 1) % len(p.free)
	p.n--
	return port, true
}

// put returns port to the back of the queue.
func (p *portPool) put(port int) {
	p.free[(p.head+p.n)%len(p.free)] = port
	p.n++
}

// available returns the number of free ports.
func (p *portPool) available() int { return p.n }
