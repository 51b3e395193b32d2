package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/coder/websocket"

	"github.com/convene/convene/internal/chat"
)

// conversation is a member's socket into its session's conversation
// (package chat, docs in internal/chat/doc.go): binary frames are
// messages in package conversation's wire form, both ways; text frames
// from the node are JSON (hello, member, error). Who: a member token of
// the session (the node numbers members, and a message speaks for its
// sender). What caps it: the event sockets' caps (ws_max_per_session,
// ws_max), chat.MaxMessage bytes a frame, chat.Rate messages a second.
func (s *Server) conversation(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	if s.o.Chat == nil {
		writeError(w, http.StatusNotImplemented, "no_chat", "this node carries no conversations")
		return
	}
	p, ok := s.memberSocket(w, r, sid, "conversation")
	if !ok {
		return
	}
	defer s.ws.give(sid)
	ms, err := s.o.Sessions.Members(r.Context(), sid)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	name := ""
	for _, m := range ms {
		if m.ID == p.member {
			name = m.Name
		}
	}
	if name == "" {
		writeError(w, http.StatusForbidden, "forbidden", "not a member of this session any more")
		return
	}
	cc, err := s.o.Chat.Attach(r.Context(), sid, p.member, name)
	if err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	defer cc.Close()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(chat.MaxMessage + 1024)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.keepAlive(ctx, cancel, c)
	go func() { // the node's frames to the member
		defer cancel()
		for {
			b, bin, ok := cc.Next(ctx)
			if !ok {
				return
			}
			typ := websocket.MessageText
			if bin {
				typ = websocket.MessageBinary
			}
			if err := c.Write(ctx, typ, b); err != nil {
				return
			}
		}
	}()
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) || ctx.Err() != nil {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		if typ == websocket.MessageBinary {
			cc.Receive(b)
		} else {
			cc.Text(b)
		}
	}
}
