package chat

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/conversation"
)

// Flows of a session's conversation. Their delays are the seed's δ (the
// delay a flow tolerates before quality suffers) and λ (beyond which
// delivery is useless); Δ = max δ + 2ε.
const (
	FlowChat    uint32 = 1 // UTF-8 text
	FlowBoard   uint32 = 2 // whiteboard strokes; needs the data floor
	FlowPointer uint32 = 3 // a member's pointer on the whiteboard; not in a hello's history
	FlowNotes   uint32 = 4 // the session's shared notes, the whole document (web/src/notes.ts)
)

// Flows are every session's. A pointer tolerates little delay and its
// loss least of all (the next position supersedes a lost one); notes are
// edited at typing pace and each update carries the whole document.
var Flows = []conversation.Flow{
	{ID: FlowChat, Name: "chat", Delay: 500 * time.Millisecond, LossDelay: 30 * time.Second},
	{ID: FlowBoard, Name: "board", Delay: 300 * time.Millisecond, LossDelay: 10 * time.Second},
	{ID: FlowPointer, Name: "pointer", Delay: 150 * time.Millisecond, LossDelay: 2 * time.Second},
	{ID: FlowNotes, Name: "notes", Delay: 500 * time.Millisecond, LossDelay: 30 * time.Second},
}

// flowName names a flow for metrics; "" for a flow that is not a session's.
func flowName(f uint32) string {
	for _, fl := range Flows {
		if fl.ID == f {
			return fl.Name
		}
	}
	return ""
}

// gated says whether a flow needs the session's "data" floor: only the
// board. In the chalkboard style only the holder draws, but everyone may
// point at the board (to ask about what is drawn) and edit the notes (the
// meeting's minutes belong to everyone in it).
func gated(f uint32) bool { return f == FlowBoard }

// Skew is ε, the clock skew allowed between members' clocks.
const Skew = 100 * time.Millisecond

// Caps.
const (
	MaxMessage = 16 << 10 // bytes of one message, header included
	MaxHistory = 200      // messages a socket's hello carries
	MaxQueue   = 512      // frames waiting for one socket
	Rate       = 100      // messages a second one socket may send on average
	Burst      = 200      // and at once
	// Reorder is how far below its sender's newest accepted sequence
	// number a message may arrive and still be taken: a data channel is
	// reliable but unordered, so a sender's messages can overtake each
	// other on the way (receivers order them, package conversation).
	Reorder = 64
)

// ID is the conversation ID of a session: 32 bits of FNV-1a of its ID,
// the same on every node.
func ID(sessionID string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(sessionID))
	return uint64(h.Sum32())
}

// hub is one session's conversation on this node.
type hub struct {
	s       *Service
	session string
	id      uint64
	conns   map[*Conn]struct{}
	members map[uint32]catalog.ConversationMember
	last    map[uint32]uint64 // each sender's last accepted seq
	mu      sync.Mutex        // guards the above, and orders accepts
	unrelay func()            // ends the relay subscription
	// seen holds, while the hub catches up (catchup.go), the messages it
	// accepted or was relayed; nil after.
	seen map[msgKey]struct{}
	done chan struct{} // closed when the session ends here
}

func (s *Service) hub(ctx context.Context, sessionID string) (*hub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hubs[sessionID]; h != nil {
		return h, nil
	}
	ms, err := s.o.Catalog.ConversationMembers(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	last, err := s.o.Catalog.LastSeqs(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	h := &hub{s: s, session: sessionID, id: ID(sessionID), conns: map[*Conn]struct{}{},
		members: map[uint32]catalog.ConversationMember{}, last: last, done: make(chan struct{})}
	for _, m := range ms {
		h.members[m.N] = m
	}
	if s.o.Relay != nil {
		h.seen = map[msgKey]struct{}{}
		if h.unrelay, err = s.o.Relay.Subscribe(sessionID, h.relayIn); err != nil {
			return nil, err
		}
		go h.catchUp(s.o.Now())
	}
	s.hubs[sessionID] = h
	return h, nil
}

// Hello is what a socket gets first.
type Hello struct {
	Type         string            `json:"type"` // "hello"
	Conversation uint64            `json:"conversation"`
	Self         uint32            `json:"self"`
	DeltaMS      int64             `json:"delta_ms"`
	SkewMS       int64             `json:"skew_ms"`
	Flows        []FlowView        `json:"flows"`
	Members      map[uint32]Member `json:"members"`
	Last         map[uint32]uint64 `json:"last"`    // each sender's last accepted seq
	History      []string          `json:"history"` // base64 wire messages, oldest first
}

// FlowView is a flow as a hello shows it.
type FlowView struct {
	ID          uint32 `json:"id"`
	Name        string `json:"name"`
	DelayMS     int64  `json:"delay_ms"`
	LossDelayMS int64  `json:"loss_delay_ms"`
}

// Member is a numbered member.
type Member struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// MemberFrame tells the sockets of a newly numbered member.
type MemberFrame struct {
	Type string `json:"type"` // "member"
	N    uint32 `json:"n"`
	Member
}

// ErrorFrame tells a socket why a message was refused.
type ErrorFrame struct {
	Type    string `json:"type"` // "error"
	Code    string `json:"code"`
	Message string `json:"message"`
	Seq     uint64 `json:"seq,omitempty"`
}

// hello is called with h.mu held. Each sender's last covers its messages
// in the history: in a cluster another node may have accepted (and
// stored) one whose relay has not arrived here yet. A member that moved
// here from that node goes on after it, and a client that resumes after
// Last takes the relayed copy for the duplicate it is. The catalog's last
// is read before the history, so what it counts is in the history, or
// is left out of it on purpose (a pointer's position, or older than the
// history reaches): a message stored after the history was read is never
// passed over by Last, and reaches the socket live. A lone node accepted
// every message itself, so its own last already counts them all.
func (h *hub) hello(ctx context.Context, self uint32, got map[msgKey]struct{}) (Hello, error) {
	var stored map[uint32]uint64
	if h.s.o.Relay != nil {
		var err error
		if stored, err = h.s.o.Catalog.LastSeqs(ctx, h.session); err != nil {
			return Hello{}, err
		}
	}
	msgs, err := h.history(ctx)
	if err != nil {
		return Hello{}, err
	}
	for n, seq := range stored {
		h.last[n] = max(h.last[n], seq)
	}
	for _, m := range msgs {
		h.last[m.Sender] = max(h.last[m.Sender], m.Seq)
	}
	conv, _ := conversation.New(conversation.Spec{ID: h.id, Members: []string{"node"}, Flows: Flows, Skew: Skew})
	hl := Hello{Type: "hello", Conversation: h.id, Self: self, DeltaMS: conv.Delta().Milliseconds(), SkewMS: Skew.Milliseconds(),
		Members: map[uint32]Member{}, Last: map[uint32]uint64{}, History: make([]string, 0, len(msgs))}
	for _, f := range Flows {
		hl.Flows = append(hl.Flows, FlowView{ID: f.ID, Name: f.Name, DelayMS: f.Delay.Milliseconds(), LossDelayMS: f.LossDelay.Milliseconds()})
	}
	for n, m := range h.members {
		hl.Members[n] = Member{ID: m.MemberID, Name: m.Name}
	}
	for n, seq := range h.last {
		hl.Last[n] = seq
	}
	for _, m := range msgs {
		hl.History = append(hl.History, base64.StdEncoding.EncodeToString(m.Body))
		if got != nil {
			got[msgKey{m.Sender, m.Seq}] = struct{}{}
		}
	}
	return hl, nil
}

// history is what a hello carries: the last MaxHistory messages but the
// pointer's (a position is stale at once, and at ten a second while a
// pointer moves they would push the chat out), and each sender's newest
// notes however old (the one a late joiner's notes converge to is among
// them: web/src/notes.ts), oldest first. Leaving messages out is safe:
// a client resumes each sender's order after Last, and counts what it
// never got before that as handled, not missing.
func (h *hub) history(ctx context.Context) ([]catalog.StoredMessage, error) {
	msgs, err := h.s.o.Catalog.MessagesExcept(ctx, h.session, MaxHistory, FlowPointer)
	if err != nil {
		return nil, err
	}
	notes, err := h.s.o.Catalog.NewestOf(ctx, h.session, FlowNotes)
	if err != nil {
		return nil, err
	}
	in := make(map[msgKey]struct{}, len(msgs))
	for _, m := range msgs {
		in[msgKey{m.Sender, m.Seq}] = struct{}{}
	}
	added := false
	for _, m := range notes {
		if _, ok := in[msgKey{m.Sender, m.Seq}]; !ok {
			msgs, added = append(msgs, m), true
		}
	}
	if added {
		sort.SliceStable(msgs, func(i, j int) bool {
			a, b := msgs[i], msgs[j]
			if !a.ReceivedAt.Equal(b.ReceivedAt) {
				return a.ReceivedAt.Before(b.ReceivedAt)
			}
			if a.Sender != b.Sender {
				return a.Sender < b.Sender
			}
			return a.Seq < b.Seq
		})
	}
	return msgs, nil
}

// Errors of a refused message; the socket is told the reason.
var (
	ErrTooBig  = errors.New("message too big")
	ErrRate    = errors.New("over the message rate")
	ErrHeader  = errors.New("bad header")
	ErrFloor   = errors.New("the data floor is another member's")
	ErrStorage = errors.New("could not store the message")
)

// accept checks, stores and forwards one message of c.
func (h *hub) accept(c *Conn, b []byte) error {
	var m conversation.Message
	if err := conversation.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrHeader, err)
	}
	switch {
	case m.Conversation != h.id:
		return fmt.Errorf("%w: conversation %d, this session's is %d", ErrHeader, m.Conversation, h.id)
	case flowName(m.Flow) == "":
		return fmt.Errorf("%w: flow %d (1 chat, 2 board, 3 pointer, 4 notes)", ErrHeader, m.Flow)
	case uint32(m.Sender) != c.n:
		return fmt.Errorf("%w: sender %d, this socket's member is %d", ErrHeader, m.Sender, c.n)
	}
	if gated(m.Flow) && h.s.o.Floors != nil && !h.s.o.Floors.MayDraw(h.session, c.member) {
		return ErrFloor
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// A sender's messages may arrive out of order (a data channel is
	// unordered): one up to Reorder below its newest is still taken,
	// unless it was already (the catalog's key says so below).
	if last := h.last[c.n]; m.Seq+Reorder <= last {
		return fmt.Errorf("%w: seq %d, the last accepted of member %d is %d", ErrHeader, m.Seq, c.n, last)
	}
	for _, d := range m.Context {
		if _, ok := h.members[uint32(d.Member)]; !ok && d.Member != 0 {
			return fmt.Errorf("%w: context names member %d, who has no number", ErrHeader, d.Member)
		}
	}
	now := h.s.o.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.s.o.Catalog.AddMessage(ctx, h.session, catalog.StoredMessage{Sender: c.n, Seq: m.Seq, Flow: m.Flow,
		SentAt: m.Sent, ReceivedAt: now, Body: b}); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return fmt.Errorf("%w: seq %d of member %d was accepted before", ErrHeader, m.Seq, c.n)
		}
		h.s.log.Error("store message", "session", h.session, "member", c.member, "err", err)
		return ErrStorage
	}
	h.last[c.n] = max(h.last[c.n], m.Seq)
	h.s.m.accepted.WithLabelValues(flowName(m.Flow)).Inc()
	h.publish(relayedMessage(c.member, b))
	k := msgKey{c.n, m.Seq}
	if h.seen != nil {
		h.seen[k] = struct{}{}
	}
	frame := append([]byte(nil), b...)
	for o := range h.conns {
		if o != c {
			o.noteSent(k)
			o.push(outFrame{bin: frame})
		}
	}
	if h.s.o.Notes != nil {
		h.s.o.Notes.NoteMessage(h.session, c.member, m.Flow, m.Seq, b)
	}
	return nil
}

// publish relays a frame to the other nodes (called under h.mu, so they
// get them in the order this node accepted them).
func (h *hub) publish(b []byte) {
	if h.s.o.Relay == nil {
		return
	}
	if err := h.s.o.Relay.Publish(h.session, b); err != nil {
		h.s.log.Warn("relay to the cluster", "session", h.session, "err", err)
	}
}
