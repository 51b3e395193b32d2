package recbench

// window is what one stream sent over a step's window: the packets
// numbered n0 to n1-1, and which of them a recording holds.
type window struct {
	n0, n1 uint32
	seen   []uint64 // bit n-n0
	got    uint32
}

func newWindow(n0, n1 uint32) window {
	return window{n0: n0, n1: n1, seen: make([]uint64, (n1-n0+63)/64)}
}

// mark notes packet n recorded; a packet outside the window, or one seen
// already (a retransmission), changes nothing.
func (w *window) mark(n uint32) {
	if n < w.n0 || n >= w.n1 {
		return
	}
	i := n - w.n0
	if w.seen[i/64]&(1<<(i%64)) != 0 {
		return
	}
	w.seen[i/64] |= 1 << (i % 64)
	w.got++
}

// missing is how many of the window's packets no recording holds.
func (w *window) missing() uint32 { return w.n1 - w.n0 - w.got }

// windows are every stream's, by stream number.
type windows []window

func (ws windows) mark(stream, n uint32) {
	if int(stream) < len(ws) {
		ws[stream].mark(n)
	}
}

// missing sums the streams' missing packets and counts the streams with
// any missing.
func (ws windows) missing() (packets uint64, streams int) {
	for i := range ws {
		if m := ws[i].missing(); m > 0 {
			packets += uint64(m)
			streams++
		}
	}
	return packets, streams
}

// sent sums the streams' window lengths.
func (ws windows) sent() (n uint64) {
	for i := range ws {
		n += uint64(ws[i].n1 - ws[i].n0)
	}
	return n
}
