package conversation

import (
	"encoding/binary"
	"errors"
	"time"
)

// Message is one message of a conversation. Its header is what the
// receivers order by; Payload is the application's.
type Message struct {
	Conversation uint64
	Flow         uint32
	Sender       MemberID
	Seq          uint64    // from 1, one space across all flows of the sender
	Sent         time.Time // millisecond precision on the wire
	// Context lists the sender's direct dependencies since its previous
	// message, ascending by member, never the sender itself: deliver this
	// message only after Seq ≤ dep.Seq of dep.Member. The sender's own
	// previous message (Seq-1) is implied.
	Context []Dep
	Payload []byte
}

// Dep names a dependency: the messages of Member up to and including Seq.
type Dep struct {
	Member MemberID
	Seq    uint64
}

// Version is the wire format's version byte.
const Version = 1

// MaxInt is the largest integer on the wire (2^53−1), so that the
// TypeScript decoder, which reads them as numbers, reads them exactly.
const MaxInt = 1<<53 - 1

// Errors of Unmarshal.
var (
	ErrVersion   = errors.New("conversation: unknown wire version")
	ErrTruncated = errors.New("conversation: truncated header")
	ErrRange     = errors.New("conversation: header field out of range")
	ErrContext   = errors.New("conversation: context not ascending or names the sender")
)

// The wire format, every integer an unsigned LEB128 varint ≤ MaxInt:
//
//	+---------+--------------+------+--------+-----+---------+---+----------------------+---------+
//	| version | conversation | flow | sender | seq | sent ms | n | n × (member, seq)    | payload |
//	| 1 byte  | uvarint      |  uv  |   uv   | uv  |   uv    | uv| member as a gap: the | to the  |
//	|   = 1   |              |      |        | ≥1  | (Unix)  |   | first as is, then    | end     |
//	|         |              |      |        |     |         |   | member − previous − 1|         |
//	+---------+--------------+------+--------+-----+---------+---+----------------------+---------+

// AppendTo appends m's wire form to b and returns it.
func (m *Message) AppendTo(b []byte) []byte {
	b = append(b, Version)
	b = binary.AppendUvarint(b, m.Conversation)
	b = binary.AppendUvarint(b, uint64(m.Flow))
	b = binary.AppendUvarint(b, uint64(m.Sender))
	b = binary.AppendUvarint(b, m.Seq)
	b = binary.AppendUvarint(b, uint64(m.Sent.UnixMilli()))
	b = binary.AppendUvarint(b, uint64(len(m.Context)))
	prev := int64(-1)
	for _, d := range m.Context {
		b = binary.AppendUvarint(b, uint64(int64(d.Member)-prev-1))
		b = binary.AppendUvarint(b, d.Seq)
		prev = int64(d.Member)
	}
	return append(b, m.Payload...)
}

// Marshal returns m's wire form in a new buffer.
func (m *Message) Marshal() []byte {
	return m.AppendTo(make([]byte, 0, 32+4*len(m.Context)+len(m.Payload)))
}

// ContextSize is the number of bytes m's context takes on the wire,
// its count included.
func (m *Message) ContextSize() int {
	n := uvarintLen(uint64(len(m.Context)))
	prev := int64(-1)
	for _, d := range m.Context {
		n += uvarintLen(uint64(int64(d.Member)-prev-1)) + uvarintLen(d.Seq)
		prev = int64(d.Member)
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Unmarshal decodes buf into m. m.Payload slices buf (the caller keeps
// owning it); m.Context reuses its backing array. Any input is safe: it
// returns an error and never panics.
func Unmarshal(buf []byte, m *Message) error {
	if len(buf) == 0 || buf[0] != Version {
		if len(buf) == 0 {
			return ErrTruncated
		}
		return ErrVersion
	}
	r := reader{b: buf[1:]}
	conv := r.uint(MaxInt)
	flow := r.uint(1<<32 - 1)
	sender := r.uint(1<<32 - 1)
	seq := r.uint(MaxInt)
	sent := r.uint(MaxInt)
	n := r.uint(MaxInt)
	if r.err != nil {
		return r.err
	}
	if seq == 0 {
		return ErrRange
	}
	if n > uint64(len(r.b))/2 { // each entry takes at least two bytes
		return ErrTruncated
	}
	ctx := m.Context[:0]
	prev := int64(-1)
	for range n {
		gap := r.uint(1<<32 - 1)
		s := r.uint(MaxInt)
		if r.err != nil {
			return r.err
		}
		member := prev + 1 + int64(gap)
		if member > 1<<32-1 || s == 0 {
			return ErrRange
		}
		if MemberID(member) == MemberID(sender) {
			return ErrContext
		}
		ctx = append(ctx, Dep{Member: MemberID(member), Seq: s})
		prev = member
	}
	*m = Message{
		Conversation: conv, Flow: uint32(flow), Sender: MemberID(sender), Seq: seq,
		Sent: time.UnixMilli(int64(sent)), Context: ctx, Payload: r.b,
	}
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.err = ErrTruncated
		return 0
	case n < 0 || v > limit:
		r.err = ErrRange
		return 0
	}
	r.b = r.b[n:]
	return v
}
