package sip

import (
	"context"
	"errors"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Durable REGISTER answers with group commit (issue 11 item 12).
//
// A REGISTER that changes a binding is answered 200 only after the change
// is in the catalog: nothing acknowledged is lost to a crash. Writing each
// binding in a transaction of its own would cap registrations at the
// catalog's commit rate, so the answers wait in a queue and one committer
// goroutine writes every change pending at that moment in one go, then
// sends the answers it made durable. While it writes, the next batch
// gathers; under load a commit carries hundreds of bindings.
//
//	worker: apply ─▶ answer waits (seq) ─▶ kick
//	committer: take waiting answers ─▶ flush (every change ≤ snapshot seq)
//	           ─▶ durable = snapshot ─▶ send each answer with seq ≤ durable

// waitingAnswer is a REGISTER answer waiting for its change (seq).
type waitingAnswer struct {
	seq  uint64
	send func(err error) // err != nil: the change could not be written
}

// maxWaiting bounds the answers waiting for a commit; beyond it the
// catalog cannot keep up and a REGISTER is answered 500 (the binding stays
// in memory and is written by the next flush; the client retries).
const maxWaiting = 1 << 16

// errBacklog is what an answer gets when maxWaiting answers already wait.
var errBacklog = errors.New("sip: too many registrations waiting for the catalog")

// afterCommit calls send once the change numbered seq is durable (or with
// the error that kept it from being written).
func (s *Server) afterCommit(seq uint64, send func(err error)) {
	if s.loc.isDurable(seq) {
		send(nil)
		return
	}
	s.commitMu.Lock()
	if len(s.waiting) >= maxWaiting {
		s.commitMu.Unlock()
		s.m.queueDrops.Inc()
		send(errBacklog)
		return
	}
	s.waiting = append(s.waiting, waitingAnswer{seq: seq, send: send})
	s.commitMu.Unlock()
	select {
	case s.commitKick <- struct{}{}:
	default:
	}
}

// commitLoop is the committer goroutine.
func (s *Server) commitLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.commitKick:
		}
		s.commitMu.Lock()
		batch := s.waiting
		s.waiting = nil
		s.commitMu.Unlock()
		if len(batch) == 0 {
			continue
		}
		start := time.Now()
		err := s.loc.flush(s.ctx)
		s.m.commit.Observe(time.Since(start).Seconds())
		if err != nil && s.ctx.Err() == nil {
			s.log.Warn("sip: save registrations", "err", err)
		}
		var again []waitingAnswer
		for _, w := range batch {
			switch {
			case s.loc.isDurable(w.seq):
				w.send(nil)
			case err != nil:
				w.send(err)
			default:
				again = append(again, w)
			}
		}
		if len(again) > 0 {
			s.commitMu.Lock()
			s.waiting = append(again, s.waiting...)
			s.commitMu.Unlock()
			select {
			case s.commitKick <- struct{}{}:
			default:
			}
		}
	}
}

// awaitCommit blocks until the change numbered seq is durable (the TCP
// path, where each request has a goroutine of its own).
func (s *Server) awaitCommit(ctx context.Context, seq uint64) error {
	done := make(chan error, 1)
	s.afterCommit(seq, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.New("sip: shutting down")
	}
}

// notStored is the answer to a REGISTER whose binding could not be
// written: the client tries again.
func (s *Server) notStored(req *sip.Request) *sip.Response {
	s.m.regFailed.Inc()
	return sip.NewResponseFromRequest(req, sip.StatusInternalServerError, "Server Error (registration not stored)", nil)
}
