package chat

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/conversation"
)

// Relay carries a session's conversation between the nodes of a cluster
// (NATS in the node): what one node accepted reaches the sockets of the
// session's members on every other node. Nodes trust each other (the
// cluster is trusted): a relayed message was checked and stored by the
// node that accepted it, and is only forwarded here.
type Relay interface {
	// Publish sends b to the session's other nodes.
	Publish(sessionID string, b []byte) error
	// Subscribe calls f with what other nodes publish for the session
	// (never this node's own) until stop.
	Subscribe(sessionID string, f func(b []byte)) (stop func(), err error)
}

// Relayed frames: a kind byte, then a message (its sender's member ID as
// a uvarint-length string, then the wire bytes) or a member frame (JSON).
const (
	relayMessage byte = 1
	relayMember  byte = 2
)

func relayedMessage(memberID string, wire []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen32+len(memberID)+len(wire))
	b = append(b, relayMessage)
	b = binary.AppendUvarint(b, uint64(len(memberID)))
	b = append(b, memberID...)
	return append(b, wire...)
}

var errRelayed = errors.New("chat: bad relayed frame")

func parseRelayed(b []byte) (kind byte, memberID string, body []byte, err error) {
	if len(b) < 1 {
		return 0, "", nil, errRelayed
	}
	switch b[0] {
	case relayMember:
		return relayMember, "", b[1:], nil
	case relayMessage:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > 256 || uint64(len(b)-1-k) < n {
			return 0, "", nil, errRelayed
		}
		return relayMessage, string(b[1+k : 1+k+int(n)]), b[1+k+int(n):], nil
	}
	return 0, "", nil, errRelayed
}

// relayIn takes what another node accepted for the hub's session: a
// message goes to every local socket and the recordings' time line; a
// member frame numbers a member here too.
func (h *hub) relayIn(b []byte) {
	kind, memberID, body, err := parseRelayed(b)
	if err != nil {
		h.s.m.dropped.WithLabelValues("bad_relay").Inc()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch kind {
	case relayMember:
		var f MemberFrame
		if json.Unmarshal(body, &f) != nil || f.Type != "member" {
			h.s.m.dropped.WithLabelValues("bad_relay").Inc()
			return
		}
		if _, known := h.members[f.N]; known {
			return
		}
		h.members[f.N] = catalog.ConversationMember{MemberID: f.ID, N: f.N, Name: f.Name}
		for o := range h.conns {
			o.push(outFrame{text: append([]byte(nil), body...)})
		}
	case relayMessage:
		var m conversation.Message
		if conversation.Unmarshal(body, &m) != nil || m.Conversation != h.id {
			h.s.m.dropped.WithLabelValues("bad_relay").Inc()
			return
		}
		sender, seq := uint32(m.Sender), m.Seq
		if seq > h.last[sender] {
			h.last[sender] = seq
		}
		k := msgKey{sender, seq}
		if h.seen != nil {
			if _, dup := h.seen[k]; dup { // caught up from the catalog first
				return
			}
			h.seen[k] = struct{}{}
		}
		frame := append([]byte(nil), body...)
		for o := range h.conns {
			if o.n != sender { // the sender moved here after sending it there
				o.noteSent(k)
				o.push(outFrame{bin: frame})
			}
		}
		h.s.m.relayed.Inc()
		if h.s.o.Notes != nil {
			h.s.o.Notes.NoteMessage(h.session, memberID, m.Flow, seq, body)
		}
	}
}
