package ng

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Relay is what the server controls (a *relay.Relay).
type Relay interface {
	Offer(callID, fromTag string, sdp []byte, user string, source netip.Addr) ([]byte, error)
	Answer(callID, fromTag, toTag string, sdp []byte, source netip.Addr) ([]byte, error)
	Delete(callID string) error
}

// Server answers ng requests on one UDP socket.
type Server struct {
	conn   *net.UDPConn
	relay  Relay
	log    *slog.Logger
	bad    atomic.Uint64
	done   chan struct{}
	closed sync.Once
}

// Listen serves ng requests for r on the UDP address addr (host:port).
func Listen(addr string, r Relay, log *slog.Logger) (*Server, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{conn: conn, relay: r, log: log.With("component", "relay-ng"), done: make(chan struct{})}
	go s.serve()
	s.log.Info("ng control listening", "addr", conn.LocalAddr().String())
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() *net.UDPAddr { return s.conn.LocalAddr().(*net.UDPAddr) }

// BadRequests counts datagrams that were not ng messages.
func (s *Server) BadRequests() uint64 { return s.bad.Load() }

// Close stops the server.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		err = s.conn.Close()
		<-s.done
	})
	return err
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, MaxMessage)
	var out []byte
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		cookie, req, err := ParseMessage(buf[:n])
		if cookie == "" {
			s.bad.Add(1)
			continue // nothing to answer to
		}
		var resp map[string]any
		if err != nil {
			s.bad.Add(1)
			resp = fail("malformed message: " + err.Error())
		} else {
			resp = s.handle(req)
		}
		if out, err = AppendMessage(out[:0], cookie, resp); err != nil {
			continue
		}
		if _, err := s.conn.WriteToUDPAddrPort(out, from); err != nil {
			s.log.Debug("ng reply", "to", from.String(), "err", err)
		}
	}
}

func fail(reason string) map[string]any {
	return map[string]any{"result": "error", "error-reason": reason}
}

// handle runs one command.
func (s *Server) handle(req map[string]any) map[string]any {
	cmd := str(req, "command")
	callID, fromTag, toTag := str(req, "call-id"), str(req, "from-tag"), str(req, "to-tag")
	switch cmd {
	case "ping":
		return map[string]any{"result": "pong"}
	case "offer", "answer":
		sdp, ok := req["sdp"].(string)
		if !ok || callID == "" || fromTag == "" {
			return fail("offer and answer need call-id, from-tag and sdp")
		}
		var out []byte
		var err error
		if cmd == "offer" {
			out, err = s.relay.Offer(callID, fromTag, []byte(sdp), "", receivedFrom(req))
		} else {
			out, err = s.relay.Answer(callID, fromTag, toTag, []byte(sdp), receivedFrom(req))
		}
		if err != nil {
			return fail(err.Error())
		}
		return map[string]any{"result": "ok", "sdp": out}
	case "delete":
		if callID == "" {
			return fail("delete needs call-id")
		}
		if err := s.relay.Delete(callID); err != nil {
			return fail(err.Error())
		}
		return map[string]any{"result": "ok"}
	case "":
		return fail("no command")
	}
	return fail("Unrecognized command")
}

// receivedFrom returns the address of an offer's "received from" key, the
// signalling source rtpengine's clients send as ["IP4", "192.0.2.1"]; the
// zero Addr when it is missing or malformed.
func receivedFrom(req map[string]any) netip.Addr {
	l, _ := req["received from"].([]any)
	if len(l) != 2 {
		return netip.Addr{}
	}
	family, _ := l[0].(string)
	s, _ := l[1].(string)
	a, err := netip.ParseAddr(s)
	if err != nil || (family == "IP4") != a.Unmap().Is4() {
		return netip.Addr{}
	}
	return a.Unmap()
}
