package relay

import (
	"errors"
	"fmt"
)

// newStream opens the four sockets of a stream (RTP and RTCP for each side)
// on the next worker. r.mu is held.
func (r *Relay) newStream(c *call) (*stream, error) {
	w := r.ws[r.next%len(r.ws)]
	r.next++
	st := &stream{call: c, w: w}
	st.sides[0].other, st.sides[1].other = &st.sides[1], &st.sides[0]
	for i := range st.sides {
		sd := &st.sides[i]
		sd.st = st
		if err := r.openSide(sd); err != nil {
			if i == 1 {
				r.closeSide(&st.sides[0])
			}
			return nil, err
		}
	}
	for i := range st.sides {
		for _, s := range []*sock{st.sides[i].rtp, st.sides[i].rtcp} {
			r.socks[s.port-r.o.PortMin].Store(s)
			if err := w.watch(s, s.port-r.o.PortMin); err != nil {
				// Not watched yet by the worker: safe to close here.
				for j := range st.sides {
					for _, s := range []*sock{st.sides[j].rtp, st.sides[j].rtcp} {
						w.unwatch(s)
						r.socks[s.port-r.o.PortMin].Store(nil)
					}
					r.closeSide(&st.sides[j])
				}
				return nil, err
			}
		}
	}
	return st, nil
}

// openSide binds the next free port pair for sd.
func (r *Relay) openSide(sd *side) error {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	for tries := r.ports.available(); tries > 0; tries-- {
		port, ok := r.ports.get()
		if !ok {
			break
		}
		fd1, err := openUDP(r.addr, port)
		if err == nil {
			fd2, err2 := openUDP(r.addr, port+1)
			if err2 == nil {
				sd.rtp = &sock{fd: fd1, port: port, side: sd}
				sd.rtcp = &sock{fd: fd2, port: port + 1, side: sd, rtcp: true}
				return nil
			}
			closeFD(fd1)
			err = err2
		}
		r.ports.put(port)
		if !errors.Is(err, errPortBusy) {
			return err
		}
		r.st.busyPorts.Add(1)
	}
	return fmt.Errorf("%w %d-%d", ErrNoPorts, r.o.PortMin, r.o.PortMax)
}

// closeSide closes sd's sockets and returns its port pair to the pool; only
// for sockets no worker has seen.
func (r *Relay) closeSide(sd *side) {
	closeFD(sd.rtp.fd)
	closeFD(sd.rtcp.fd)
	r.poolMu.Lock()
	r.ports.put(sd.rtp.port)
	r.poolMu.Unlock()
}

// release hands every stream of c to its worker to close; each returned
// channel is closed when that stream's sockets are. r.mu is held.
func (r *Relay) release(c *call) []chan struct{} {
	var done []chan struct{}
	for _, st := range c.streams {
		if st != nil {
			done = append(done, st.w.retire(st))
		}
	}
	c.streams = nil
	r.charge(c, -c.held)
	return done
}

// freeStream closes a retired stream's sockets; called by its worker.
func (r *Relay) freeStream(st *stream) {
	r.kflush(st)
	for i := range st.sides {
		sd := &st.sides[i]
		for _, s := range []*sock{sd.rtp, sd.rtcp} {
			st.w.unwatch(s)
			r.socks[s.port-r.o.PortMin].Store(nil)
			closeFD(s.fd)
		}
	}
	r.poolMu.Lock()
	for i := range st.sides {
		r.ports.put(st.sides[i].rtp.port)
	}
	r.poolMu.Unlock()
}
