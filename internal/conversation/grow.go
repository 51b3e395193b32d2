package conversation

// Members join a live session one by one and a page that reloads comes
// back in the middle of the conversation: these let a Receiver and a
// Participant start there.

// Grow makes room for senders up to n-1 (members that joined after the
// receiver was made); a smaller n changes nothing.
func (r *Receiver) Grow(n int) {
	for len(r.peers) < n {
		r.peers = append(r.peers, peer{next: 1})
	}
}

// Members is how many senders the receiver knows.
func (r *Receiver) Members() int { return len(r.peers) }

// Resume starts sender m's order after seq: its messages up to seq were
// handled before (a page's history), so the receiver waits for none of
// them. It only moves forward, and only with nothing of m held.
func (r *Receiver) Resume(m MemberID, seq uint64) {
	if int(m) >= len(r.peers) || m == r.self {
		return
	}
	p := &r.peers[m]
	if len(p.queue) == 0 && seq+1 > p.next {
		p.next = seq + 1
	}
}

// ResumeSending continues the participant's sequence after seq, the last
// it sent before (a page that reloads).
func (p *Participant) ResumeSending(seq uint64) {
	if seq > p.seq {
		p.seq = seq
	}
}

// Seq is the sequence number of the participant's last message.
func (p *Participant) Seq() uint64 { return p.seq }
