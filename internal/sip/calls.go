package sip

import (
	"strings"
	"sync"

	"github.com/emiago/sipgo/sip"
)

// callTable tracks calls that hold relay ports or count as active, by
// Call-ID, so the ports are released when the call ends.
type callTable struct {
	mu    sync.Mutex
	calls map[string]*callState
}

type callState struct {
	media    bool
	answered bool
	// relay: the call may use the relay (its INVITE was authenticated as
	// user); a re-offer in its dialog may too.
	relay bool
	user  string
	// awaitAnswer: a late offer (an INVITE without SDP, RFC 3261 13.2.1)
	// came back in a 2xx and went through the relay; the ACK carries the
	// answer.
	awaitAnswer bool
}

func newCallTable() *callTable { return &callTable{calls: map[string]*callState{}} }

func (t *callTable) get(id string) *callState {
	c := t.calls[id]
	if c == nil {
		c = &callState{}
		t.calls[id] = c
	}
	return c
}

// allowRelay records that id's INVITE was authenticated as user, so its
// media may go through the relay.
func (t *callTable) allowRelay(id, user string) {
	t.mu.Lock()
	c := t.get(id)
	c.relay, c.user = true, user
	t.mu.Unlock()
}

// relayUser reports whether id may use the relay, and for whom.
func (t *callTable) relayUser(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls[id]
	if c == nil || !c.relay {
		return "", false
	}
	return c.user, true
}

func (t *callTable) media(id string) {
	t.mu.Lock()
	t.get(id).media = true
	t.mu.Unlock()
}

// lateOffer records that id's media goes through the relay and that its
// next ACK carries the answer to the offer of a 2xx.
func (t *callTable) lateOffer(id string) {
	t.mu.Lock()
	c := t.get(id)
	c.media, c.awaitAnswer = true, true
	t.mu.Unlock()
}

// takeAnswer reports, once, whether id's ACK is awaited with an answer.
func (t *callTable) takeAnswer(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls[id]
	if c == nil || !c.awaitAnswer {
		return false
	}
	c.awaitAnswer = false
	return true
}

func (t *callTable) answered(id string, m *metrics) {
	t.mu.Lock()
	c := t.get(id)
	if !c.answered {
		c.answered = true
		m.callsActive.Inc()
	}
	t.mu.Unlock()
}

// end forgets a call and reports whether it held media.
func (t *callTable) end(id string, m *metrics) (media bool) {
	t.mu.Lock()
	c, ok := t.calls[id]
	if ok {
		delete(t.calls, id)
		if c.answered {
			m.callsActive.Dec()
		}
	}
	t.mu.Unlock()
	return ok && c.media
}

func (t *callTable) endAll(s *Server) {
	t.mu.Lock()
	ids := make([]string, 0, len(t.calls))
	for id := range t.calls {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		s.endCall(id)
	}
}

// endCall releases a call's relay ports (BYE).
func (s *Server) endCall(callID string) {
	if s.calls.end(callID, s.m) && s.o.Media != nil {
		if err := s.o.Media.Release(callID); err != nil {
			s.log.Debug("sip: media delete", "call_id", callID, "err", err)
		}
	}
}

// endMedia releases the ports of a call that was never answered.
func (s *Server) endMedia(callID string) { s.endCall(callID) }

func isSDP(m interface {
	GetHeader(string) sip.Header
	Body() []byte
}) bool {
	ct := m.GetHeader("Content-Type")
	return ct != nil && len(m.Body()) > 0 && strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct.Value())), "application/sdp")
}

func isSDPResponse(res *sip.Response) bool { return isSDP(res) }
