package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/testutil"
)

// chatRun drives a session's conversation with many members at once, each
// a Go client (package conversation's Participant on a conversation
// socket), and checks every delivery as it happens against what was sent:
// per-sender order, Δ-causal order (against the full causal past each
// sender had when it sent, not only the context on the wire), deadlines,
// and exceptions naming only what did not come in time. Timing is never
// asserted: what is expected of each message follows from when the test
// saw it arrive, so a slow machine makes more messages late, not a
// failure.
type chatRun struct {
	t     *testing.T
	sid   string
	delta time.Duration
	// strict: every message crosses one node over one TCP stream, in the
	// order the node accepted them, so an exception may name only a
	// message that never reached the node.
	strict  bool
	mu      sync.Mutex
	sent    map[conversation.Dep]*sentMsg
	members []*chatMember
	nerr    atomic.Int32
}

type sentMsg struct {
	m       conversation.Message
	dropped bool     // the lossy sender never sent it
	vc      []uint64 // what its sender had resolved from each member
}

func newChatRun(t *testing.T, sid string) *chatRun {
	return &chatRun{t: t, sid: sid, sent: map[conversation.Dep]*sentMsg{}}
}

// fail reports a failure from any goroutine, the first 20 of them.
func (r *chatRun) fail(format string, args ...any) {
	if r.nerr.Add(1) <= 20 {
		r.t.Errorf(format, args...)
	}
}

func (r *chatRun) lookup(id conversation.Dep) *sentMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[id]
}

// chatMember is one member's client; mu guards everything below it.
type chatMember struct {
	r    *chatRun
	name string
	tok  string
	self uint32
	dial func() string // the node's (or a link's) base URL to dial

	mu       sync.Mutex
	c        *websocket.Conn
	cancel   context.CancelFunc
	reading  chan struct{}   // closed when the reader has stopped
	closing  *websocket.Conn // the socket disconnect is closing
	p        *conversation.Participant
	resolved map[conversation.MemberID]uint64 // delivered or named missing, contiguous
	resumed  map[conversation.MemberID]uint64 // passed over by a hello's Last (a reconnect)
	arrived  map[conversation.Dep]time.Time
	done     map[conversation.Dep]bool // delivered, or shown from a hello's history
	named    map[conversation.Dep]bool // declared missing in an exception
	count    [4]int
	frames   int           // messages the socket brought
	held     int           // deliveries later than their arrival
	slowest  time.Duration // largest arrival − sent
	lastSeq  uint64        // the last seq this member stamped
	hello    chat.Hello
}

// join opens member's socket through dial() and starts reading it.
func (r *chatRun) join(name, tok string, dial func() string) *chatMember {
	r.t.Helper()
	m := &chatMember{r: r, name: name, tok: tok, dial: dial,
		resolved: map[conversation.MemberID]uint64{}, resumed: map[conversation.MemberID]uint64{},
		arrived: map[conversation.Dep]time.Time{}, done: map[conversation.Dep]bool{}, named: map[conversation.Dep]bool{}}
	m.connect()
	m.self = m.hello.Self
	r.mu.Lock()
	r.members = append(r.members, m)
	r.mu.Unlock()
	ticker := time.NewTicker(5 * time.Millisecond)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			m.mu.Lock()
			now := time.Now()
			m.check(m.p.Tick(now), now)
			m.mu.Unlock()
		}
	}()
	r.t.Cleanup(func() {
		ticker.Stop()
		close(stop)
		m.disconnect()
	})
	return m
}

// connect dials, takes the hello and starts the reader. A hello after a
// reconnect resumes the member: its history is shown, and every sender's
// order goes on after its Last.
func (m *chatMember) connect() {
	t := m.r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := strings.Replace(m.dial(), "http", "ws", 1) + "/api/v1/sessions/" + m.r.sid + "/conversation"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + m.tok}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	var hello chat.Hello
	typ, b, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &hello) != nil {
		t.Fatalf("%s's hello: %v %q", m.name, err, b)
	}
	p, err := chat.ParticipantFor(hello)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	reconnect := m.p != nil
	if reconnect {
		p.Grow(m.p.Members())
		m.resume(hello)
	}
	m.c, m.p, m.hello = c, p, hello
	rctx, rcancel := context.WithCancel(context.Background())
	m.cancel, m.reading = rcancel, make(chan struct{})
	m.mu.Unlock()
	go m.read(rctx, c, m.reading)
}

// resume takes a reconnect's hello: nothing this member had is lost (each
// sender's messages up to its Last were delivered before or are in the
// history), its own last message is the one it sent last, and what the
// history repeats is not shown twice. Called with m.mu held.
func (m *chatMember) resume(h chat.Hello) {
	if got := h.Last[m.self]; got != m.lastSeq {
		m.r.fail("%s back on another node: the hello says its last message is %d, it sent %d", m.name, got, m.lastSeq)
	}
	for _, s := range h.History {
		b, err := base64.StdEncoding.DecodeString(s)
		var msg conversation.Message
		if err == nil {
			err = conversation.Unmarshal(b, &msg)
		}
		if err != nil {
			m.r.fail("%s: history entry %q: %v", m.name, s, err)
			continue
		}
		if uint32(msg.Sender) != m.self {
			m.done[conversation.Dep{Member: msg.Sender, Seq: msg.Seq}] = true
		}
	}
	for k, last := range h.Last {
		x := conversation.MemberID(k)
		if k == m.self || last <= m.resolved[x] {
			continue
		}
		for s := m.resolved[x] + 1; s <= last; s++ {
			id := conversation.Dep{Member: x, Seq: s}
			if sm := m.r.lookup(id); sm != nil && !sm.dropped && !m.done[id] {
				m.r.fail("%s back: %v was stored but is neither delivered before nor in the hello's history", m.name, id)
			}
		}
		m.resolved[x], m.resumed[x] = last, last
	}
}

// disconnect closes the socket and waits for the reader to stop. The
// close handshake comes back after the node took every frame sent before
// it (the node reads a socket in order), so a member that moves knows its
// last message was stored; a client that vanishes cannot know, and may
// find its next sequence number taken.
func (m *chatMember) disconnect() {
	m.mu.Lock()
	c, cancel, reading := m.c, m.cancel, m.reading
	m.closing = c
	m.mu.Unlock()
	// Close returns nil once the node's close frame came back: the
	// handshake finished. Whichever of Close and the reader takes that
	// frame, the other finds the connection closed (net.ErrClosed).
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		m.r.fail("%s's close handshake: %v", m.name, err)
	}
	<-reading
	cancel()
}

// reconnect moves the member to another node (or the same one): a page
// that reloads, or a client whose node went away.
func (m *chatMember) reconnect(dial func() string) {
	m.disconnect()
	m.dial = dial
	m.connect()
}

func (m *chatMember) read(ctx context.Context, c *websocket.Conn, done chan struct{}) {
	defer close(done)
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			m.mu.Lock()
			closing := m.closing == c
			m.mu.Unlock()
			if ctx.Err() == nil && !strings.Contains(err.Error(), "StatusNormalClosure") &&
				!strings.Contains(err.Error(), "StatusGoingAway") && !(closing && errors.Is(err, net.ErrClosed)) {
				m.r.fail("%s's socket: %v", m.name, err)
			}
			return
		}
		if typ == websocket.MessageText {
			var f map[string]any
			json.Unmarshal(b, &f)
			if f["type"] == "error" {
				m.r.fail("%s was refused a message: %v", m.name, f)
			}
			continue // "member": every participant is grown before the run
		}
		var msg conversation.Message
		if err := conversation.Unmarshal(b, &msg); err != nil {
			m.r.fail("%s: %v", m.name, err)
			return
		}
		m.mu.Lock()
		now := time.Now()
		m.frames++
		id := conversation.Dep{Member: msg.Sender, Seq: msg.Seq}
		if _, dup := m.arrived[id]; !dup {
			m.arrived[id] = now
			m.slowest = max(m.slowest, now.Sub(msg.Sent))
		}
		if int(msg.Sender) >= m.p.Members() {
			m.p.Grow(int(msg.Sender) + 1)
		}
		out, err := m.p.Receive(msg, now)
		if err != nil {
			m.r.fail("%s: receive %v: %v", m.name, id, err)
		}
		m.check(out, now)
		m.mu.Unlock()
	}
}

// send stamps the member's next message; drop makes it a lossy sender's
// (the sequence number is used, the node never sees it).
func (m *chatMember) send(flow uint32, drop bool) {
	m.mu.Lock()
	now := time.Now()
	msg, err := m.p.Send(flow, fmt.Appendf(nil, "%s on flow %d", m.name, flow), now)
	if err != nil {
		m.mu.Unlock()
		m.r.fail("%s: send: %v", m.name, err)
		return
	}
	m.lastSeq = msg.Seq
	sm := &sentMsg{m: msg, dropped: drop, vc: make([]uint64, m.p.Members())}
	for x := range sm.vc {
		sm.vc[x] = m.resolved[conversation.MemberID(x)]
	}
	sm.vc[m.self] = msg.Seq - 1
	c := m.c
	m.mu.Unlock()
	m.r.mu.Lock()
	m.r.sent[conversation.Dep{Member: msg.Sender, Seq: msg.Seq}] = sm
	m.r.mu.Unlock()
	if drop {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageBinary, msg.Marshal()); err != nil {
		m.r.fail("%s: write: %v", m.name, err)
	}
}

// check checks one batch of deliveries at now. Called with m.mu held.
//
// A batch delivers at the deadlines it reached: a message given up at its
// deadline is delivered at that deadline, however late the tick, and so
// is what was waiting only for it (at, below). A client's tick is always
// a little late; the Receiver's order is that of an exact one.
func (m *chatMember) check(out []conversation.Delivery, now time.Time) {
	r := m.r
	at := now
	for i, d := range out {
		id := conversation.Dep{Member: d.Message.Sender, Seq: d.Message.Seq}
		x := id.Member
		sm := r.lookup(id)
		arr, arrived := m.arrived[id]
		switch {
		case sm == nil || sm.dropped:
			r.fail("%s: delivered %v, which was never sent", m.name, id)
			continue
		case !arrived:
			r.fail("%s: delivered %v, which never arrived", m.name, id)
			continue
		case m.done[id]:
			r.fail("%s: %v delivered twice (%v)", m.name, id, d.Status)
			continue
		}
		m.done[id] = true
		m.count[d.Status]++
		if now.After(arr) {
			m.held++
		}
		deadline := sm.m.Sent
		if arr.Before(deadline) {
			deadline = arr
		}
		deadline = deadline.Add(r.delta)
		late := arr.Sub(sm.m.Sent) > r.delta
		for _, g := range d.Missing {
			if g.First != m.resolved[g.Member]+1 || g.Last < g.First {
				r.fail("%s: %v names %v, which does not follow %d", m.name, id, g, m.resolved[g.Member])
			}
			for q := g.First; q <= g.Last; q++ {
				nid := conversation.Dep{Member: g.Member, Seq: q}
				nm := r.lookup(nid)
				_, in := m.arrived[nid]
				switch {
				case nm == nil:
					r.fail("%s: %v names %v, never sent", m.name, id, nid)
				case nm.dropped: // lost: what an exception is for
				case in:
					r.fail("%s: %v names %v, which had arrived", m.name, id, nid)
				case r.strict:
					r.fail("%s: %v names %v, which the node stored and sends in order", m.name, id, nid)
				}
				m.named[nid] = true
			}
			m.resolved[g.Member] = max(m.resolved[g.Member], g.Last)
		}
		if d.Status == conversation.Late && id.Seq <= m.resolved[x] {
			if !m.named[id] {
				r.fail("%s: %v late and out of order, but never declared missing", m.name, id)
			}
			continue
		}
		if id.Seq != m.resolved[x]+1 {
			r.fail("%s: %v out of %d's order (resolved up to %d)", m.name, id, x, m.resolved[x])
		}
		switch d.Status {
		case conversation.Delivered:
			if late || at.After(deadline) {
				r.fail("%s: %v delivered at %v, past its deadline %v (arrived %v)", m.name, id, at, deadline, arr)
			}
			m.causal(id, sm, at)
		case conversation.Expired:
			if len(d.Missing) == 0 {
				r.fail("%s: %v expired naming nothing", m.name, id)
			}
			// Only a late message forces what it follows before that
			// one's deadline; it comes next in the same batch.
			forcedByLate := false
			for _, e := range out[i+1:] {
				forcedByLate = forcedByLate || e.Status == conversation.Late
			}
			if now.Before(deadline) && !forcedByLate {
				r.fail("%s: %v given up at %v, before its deadline %v", m.name, id, now, deadline)
			}
			if !forcedByLate {
				at = deadline
				m.causal(id, sm, at)
			}
		case conversation.Late:
			if !late {
				r.fail("%s: %v reported late, but it arrived %v after it was sent (Δ %v)", m.name, id, arr.Sub(sm.m.Sent), r.delta)
			}
		default:
			r.fail("%s: %v %v", m.name, id, d.Status)
		}
		m.resolved[x] = id.Seq
	}
}

// causal checks Δ-causality at the delivery of id: everything in its
// sender's causal past when it was sent has been delivered (or declared
// missing) here, unless its own deadline has passed (the seed's bound).
func (m *chatMember) causal(id conversation.Dep, sm *sentMsg, now time.Time) {
	for y, q := range sm.vc {
		if conversation.MemberID(y) == id.Member || uint32(y) == m.self {
			continue
		}
		for s := m.resolved[conversation.MemberID(y)] + 1; s <= q; s++ {
			pid := conversation.Dep{Member: conversation.MemberID(y), Seq: s}
			pm := m.r.lookup(pid)
			if pm == nil {
				m.r.fail("%s: %v depends on %v, never sent", m.name, id, pid)
				return
			}
			if dl := pm.m.Sent.Add(m.r.delta); !dl.Before(now) {
				m.r.fail("%s: %v delivered at %v before %v (deadline %v) in its causal past", m.name, id, now, pid, dl)
			}
		}
	}
}

// settle waits until every member has resolved every other's last stored
// message and holds nothing, then checks that nothing stored was lost,
// that every lost message followed by more from its sender was named in
// an exception, and that the catalog holds each stored message once.
func (r *chatRun) settle(n *Node) {
	t := r.t
	t.Helper()
	last := map[conversation.MemberID]uint64{} // each sender's last stored seq
	stored := map[conversation.Dep]bool{}
	r.mu.Lock()
	for id, sm := range r.sent {
		if !sm.dropped {
			stored[id] = true
			last[id.Member] = max(last[id.Member], id.Seq)
		}
	}
	r.mu.Unlock()
	testutil.WaitUntil(t, 60*time.Second, func() string {
		for _, m := range r.members {
			m.mu.Lock()
			held := m.p.Held()
			var behind string
			for x, s := range last {
				if uint32(x) != m.self && m.resolved[x] < s {
					behind = fmt.Sprintf("%d's %d (has %d)", x, s, m.resolved[x])
				}
			}
			m.mu.Unlock()
			if behind != "" || held != 0 {
				return fmt.Sprintf("%s still waits for %s, holds %d", m.name, behind, held)
			}
		}
		return ""
	})
	for _, m := range r.members {
		m.mu.Lock()
		for id, sm := range r.sent {
			switch {
			case uint32(id.Member) == m.self:
			case !sm.dropped && !m.done[id]:
				r.fail("%s never delivered %v", m.name, id)
			case sm.dropped && id.Seq < last[id.Member] && id.Seq > m.resumed[id.Member] && !m.named[id]:
				r.fail("%s: %v was lost and passed over without an exception", m.name, id)
			}
		}
		m.mu.Unlock()
	}
	msgs, err := n.cat.Messages(context.Background(), r.sid, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	inCatalog := map[conversation.Dep]int{}
	for _, sm := range msgs {
		inCatalog[conversation.Dep{Member: conversation.MemberID(sm.Sender), Seq: sm.Seq}]++
	}
	for id := range stored {
		if inCatalog[id] != 1 {
			r.fail("the catalog holds %v %d times", id, inCatalog[id])
		}
	}
	if len(msgs) != len(stored) {
		r.fail("the catalog holds %d messages, %d were sent to the node", len(msgs), len(stored))
	}
}

// report logs what each member saw and returns the totals.
func (r *chatRun) report() (count [4]int, named, held int, slowest time.Duration) {
	for _, m := range r.members {
		m.mu.Lock()
		for i, c := range m.count {
			count[i] += c
		}
		named += len(m.named)
		held += m.held
		slowest = max(slowest, m.slowest)
		m.mu.Unlock()
	}
	dropped := 0
	for _, sm := range r.sent {
		if sm.dropped {
			dropped++
		}
	}
	r.t.Logf("Δ %v; %d messages sent, %d dropped by their sender; deliveries: %d delivered, %d expired, %d late; "+
		"%d named missing; %d held for a while; slowest arrival %v after sending",
		r.delta, len(r.sent), dropped, count[conversation.Delivered], count[conversation.Expired],
		count[conversation.Late], named, held, slowest)
	return count, named, held, slowest
}

// workload is the seed's (internal/conversation/workload_test.go): each
// member sends msgs messages at random on the chat and board flows, a
// uniform 0–2×interval apart, and loses each with probability loss before
// the node (a lossy sender).
func (r *chatRun) workload(m *chatMember, seed uint64, msgs int, interval time.Duration, loss float64, halfway func()) {
	rng := rand.New(rand.NewPCG(seed, uint64(m.self)))
	for i := range msgs {
		time.Sleep(time.Duration(rng.Int64N(int64(2*interval) + 1)))
		flow := chat.FlowChat
		if rng.IntN(2) == 1 {
			flow = chat.FlowBoard
		}
		m.send(flow, rng.Float64() < loss)
		if i == msgs/2 && halfway != nil {
			halfway()
		}
	}
}

// growAll sizes every member's receiver for all members, once everyone is
// numbered.
func (r *chatRun) growAll() {
	n := 0
	for _, m := range r.members {
		n = max(n, int(m.self)+1)
	}
	for _, m := range r.members {
		m.mu.Lock()
		m.p.Grow(n)
		if r.delta == 0 {
			r.delta = time.Duration(m.hello.DeltaMS) * time.Millisecond
		}
		m.mu.Unlock()
	}
}
