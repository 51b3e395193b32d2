package sfu

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/convene/convene/internal/capacity"
)

// Conn is a browser's signalling socket.
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, b []byte) error
}

// Closer is a Conn that can end with a close frame (RFC 6455 §7.4.1).
// When the member's peer ends (it left, was removed, its session ended)
// Serve closes such a Conn with 1000 before it stops reading; when the
// node goes (Close) with 1001, "going away": the web app rejoins on
// another node then, and only then (web/src/move.ts rejoinTarget). A
// socket that is cut without a close frame reads as 1006 there.
type Closer interface {
	Close(code int, reason string) error
}

// maxFrameRate caps what one socket may send: frames beyond it in a second
// are refused, and a socket that keeps it up for 5 s is hung up.
const maxFrameRate = 50

// Serve runs a browser member's signalling socket until either side hangs
// up. The caller has authenticated the member.
func (s *SFU) Serve(ctx context.Context, sessionID, memberID string, c Conn) error {
	if to, ok := s.place(ctx, sessionID, memberID); ok {
		s.m.placed.Inc()
		writeFrame(ctx, c, Frame{Type: "error", Code: "moved", Message: "this session meets on node " + to.Node,
			Alternatives: []capacity.Alternative{to}})
		return ErrPlaced
	}
	p, err := s.newPeer(sessionID, memberID, modeBrowser)
	if err != nil {
		writeFrame(ctx, c, Frame{Type: "error", Code: joinErrorCode(err), Message: err.Error(), Alternatives: alternatives(err)})
		return err
	}
	defer p.Close()
	nodes := s.failover()
	p.send(Frame{Type: "welcome", Member: memberID, ICEServers: s.cfg.ICEServers, Alternatives: nodes})
	if err := p.do(p.attachReceivers); err != nil {
		writeFrame(ctx, c, Frame{Type: "error", Code: "fatal", Message: err.Error()})
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer cancel()
		refresh := time.NewTicker(FailoverRefresh)
		defer refresh.Stop()
		for {
			select {
			case <-refresh.C:
				if now := s.failover(); !sameNodes(now, nodes) {
					nodes = now
					p.send(Frame{Type: "nodes", Alternatives: nodes})
				}
			case f := <-p.out:
				if err := writeFrame(ctx, c, f); err != nil {
					p.Close()
					return
				}
			case <-p.done:
				s.hangUp(c)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	p.resync()
	var (
		window time.Time
		n      int
		over   int
	)
	for {
		b, err := c.Read(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if now := time.Now(); now.Sub(window) >= time.Second {
			if n > maxFrameRate {
				over++
			} else {
				over = 0
			}
			window, n = now, 0
		}
		n++
		if over >= 5 {
			s.m.refused.WithLabelValues("frame_flood").Inc()
			p.sendError("fatal", "too many frames: over 50 a second for 5 s")
			return errors.New("signalling flood")
		}
		if n > maxFrameRate {
			p.sendError("rate_limited", "over 50 frames a second; frame ignored")
			continue
		}
		p.Handle(b)
	}
}

func writeFrame(ctx context.Context, c Conn, f Frame) error {
	b := f.raw
	if b == nil {
		var err error
		if b, err = json.Marshal(f); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(wctx, b)
}

// failover is the cluster's other nodes a member may rejoin on
// (Config.Failover); none on a lone node.
func (s *SFU) failover() []capacity.Alternative {
	if s.cfg.Failover == nil {
		return nil
	}
	return s.cfg.Failover()
}

// sameNodes reports whether two lists name the same nodes at the same
// addresses, in the same order (their room changes at every heartbeat
// and is not news).
func sameNodes(a, b []capacity.Alternative) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node || a[i].URL != b[i].URL || a[i].TokenValid != b[i].TokenValid {
			return false
		}
	}
	return true
}

// hangUp closes c with a close frame if it can (Closer): 1001 while the
// node goes away, else 1000.
func (s *SFU) hangUp(c Conn) {
	cl, ok := c.(Closer)
	if !ok {
		return
	}
	if s.Closing() {
		cl.Close(1001, "the node is shutting down")
	} else {
		cl.Close(1000, "")
	}
}
