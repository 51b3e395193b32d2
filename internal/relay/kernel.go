package relay

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/convene/convene/internal/relay/kfwd"
)

// The kernel fast path (Options.Kernel, package kfwd). A worker installs a
// flow once a side's sender has latched and the other side's destination is
// known; from then on the kernel forwards that sender's datagrams without
// waking the worker. Any change to either side's addresses (an offer or
// answer, a latch) and the end of the stream take the stream's flows out
// again, under the stream's kmu, so a flow never outlives the addresses it
// was built from: control stores new addresses before it takes kmu, and the
// worker reads them after it has taken kmu.

// Socket kernel states.
const (
	kNone      = iota // not installed; the worker may try
	kInstalled        // the kernel forwards this socket's latched sender
	kNever            // not eligible until the stream's addresses change
)

// kernelHeader is what the kernel counts per datagram beyond the UDP
// payload: Ethernet, IPv4 without options, UDP.
const kernelHeader = 14 + 20 + 8

// kflow is an installed flow, as the relay tracks it to add its counts.
type kflow struct {
	call *call
	seen kfwd.Counts
}

// kernelState is the relay's side of the fast path.
type kernelState struct {
	f *kfwd.Forwarder

	mu    sync.Mutex
	flows map[kfwd.Key]*kflow // guarded by mu

	packets, bytes, failures atomic.Uint64
}

// kinstall tries to hand the flow into socket s (of side x) to the kernel.
// Called by the stream's worker.
func (r *Relay) kinstall(s *sock, x *side, idx int) {
	st := x.st
	st.kmu.Lock()
	defer st.kmu.Unlock()
	if s.kstate.Load() != kNone {
		return
	}
	y := x.other
	out := y.rtp
	switch {
	case st.raw.Load():
		s.kstate.Store(kNever) // not RTP: the kernel checks the RTP version
		return
	case s.rtcp:
		// The kernel passes RTCP up anyway (kfwd checkRTP): user space
		// checks compound packets. Keep the flow map for RTP.
		s.kstate.Store(kNever)
		return
	case x.mux.Load() && !y.mux.Load():
		// RTCP multiplexed on x's RTP port goes to y's RTCP port: that
		// takes a look at every packet, which the kernel does not do.
		s.kstate.Store(kNever)
		return
	}
	p, dp := x.remote[idx].Load(), y.remote[0].Load()
	if p == nil || !p.latched || !dp.known() {
		return
	}
	in, ok1 := kfwd.MakeKey(p.ap, netip.AddrPortFrom(r.addr, uint16(s.port)))
	fwd, ok2 := kfwd.MakeKey(netip.AddrPortFrom(r.addr, uint16(out.port)), dp.ap)
	if !ok1 || !ok2 {
		s.kstate.Store(kNever)
		return
	}
	if err := r.k.f.Add(in, fwd); err != nil {
		if r.k.failures.Add(1) == 1 {
			r.log.Warn("kernel fast path refused a flow; it stays in user space", "err", err)
		}
		s.kstate.Store(kNever)
		return
	}
	st.kflows = append(st.kflows, in)
	r.k.mu.Lock()
	r.k.flows[in] = &kflow{call: st.call}
	r.k.mu.Unlock()
	s.kstate.Store(kInstalled)
}

// kflush takes st's flows out of the kernel, adds what they forwarded since
// the last poll, and lets its sockets be installed again.
func (r *Relay) kflush(st *stream) {
	if r.k == nil {
		return
	}
	st.kmu.Lock()
	defer st.kmu.Unlock()
	for _, key := range st.kflows {
		c := r.k.f.Delete(key)
		r.k.mu.Lock()
		if fl := r.k.flows[key]; fl != nil {
			r.k.add(fl, c)
			delete(r.k.flows, key)
		}
		r.k.mu.Unlock()
	}
	st.kflows = st.kflows[:0]
	for i := range st.sides {
		st.sides[i].rtp.kstate.Store(kNone)
		st.sides[i].rtcp.kstate.Store(kNone)
	}
}

// add accounts the counts c of flow fl beyond what was seen; k.mu is held.
func (k *kernelState) add(fl *kflow, c kfwd.Counts) {
	if c.Packets <= fl.seen.Packets {
		return
	}
	dp, db := c.Packets-fl.seen.Packets, c.Bytes-fl.seen.Bytes
	fl.seen = c
	fl.call.packets.Add(dp)
	k.packets.Add(dp)
	k.bytes.Add(db - dp*kernelHeader)
}

// kpoll adds what every installed flow forwarded since the last poll to its
// call (for the media timeout) and to the relay's counters.
func (r *Relay) kpoll() {
	if r.k == nil {
		return
	}
	err := r.k.f.Each(func(key kfwd.Key, c kfwd.Counts) {
		r.k.mu.Lock()
		if fl := r.k.flows[key]; fl != nil {
			r.k.add(fl, c)
		}
		r.k.mu.Unlock()
	})
	if err != nil {
		r.log.Warn("reading the kernel's flow counts failed", "err", err)
	}
}

// kflowCount returns the number of flows in the kernel.
func (r *Relay) kflowCount() int {
	if r.k == nil {
		return 0
	}
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	return len(r.k.flows)
}

// openKernel loads the fast path; on failure the relay runs without it.
func (r *Relay) openKernel() {
	// At most one flow per socket: a socket's old flow leaves before a new one comes.
	f, err := kfwd.Open(r.addr, r.o.PortMax-r.o.PortMin+1, r.o.MaxPacket)
	if err != nil {
		r.log.Warn("kernel fast path unavailable; forwarding in user space only", "err", err)
		return
	}
	r.k = &kernelState{f: f, flows: map[kfwd.Key]*kflow{}}
}
