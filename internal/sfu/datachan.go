package sfu

import (
	"context"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"
)

// ConversationLabel is the label of the one data channel a browser member
// may open on its publisher connection: its session's conversation (chat
// and whiteboard), the same frames as the conversation WebSocket.
const ConversationLabel = "conversation"

// Conversations opens a member's place in its session's conversation
// (chat.Service, adapted by node). The SFU carries the frames and never
// reads them.
type Conversations interface {
	Attach(ctx context.Context, sessionID, memberID string) (DataConn, error)
}

// DataConn is one member's conversation socket (chat.Conn): Next yields
// frames to send (binary: a message, else JSON text) until ok is false;
// Receive takes a binary message read, Text a text one.
type DataConn interface {
	Next(ctx context.Context) (b []byte, binary, ok bool)
	Receive(b []byte)
	Text(b []byte)
	Close()
}

// Caps of the conversation channel, beside chat's own (its MaxMessage and
// rate apply in DataConn.Receive).
const (
	// MaxDataMessage is the largest message the node takes on a data
	// channel (the SDP's max-message-size): a larger one closes the
	// channel (pion). Anything up to it reaches chat, which answers an
	// over-size message with an error frame, as on the WebSocket.
	MaxDataMessage = 64 << 10
	// dataReceiveBuffer is the SCTP receive window of a connection:
	// what a browser can have in flight to the node.
	dataReceiveBuffer = 256 << 10
	// dataHighWater and dataLowWater bound what waits in SCTP's send
	// buffer for one channel: above high, the pump waits until it drains
	// to low, so a browser that does not read fills its chat queue and
	// is hung up by chat (slow_socket), as a WebSocket is.
	dataHighWater = 256 << 10
	dataLowWater  = 64 << 10
	// maxRefusedChannels is how many channels a peer may have refused
	// before the node hangs it up (a flood of channel opens).
	maxRefusedChannels = 16
	attachTimeout      = 5 * time.Second
)

// onDataChannel takes a channel the client opened: on a browser's
// publisher connection one reliable "conversation" channel at a time, none
// on any other connection or for WHIP and WHEP clients. It runs before
// pion opens the channel, so the handlers are in place for its first
// message.
func (p *Peer) onDataChannel(dc *webrtc.DataChannel) {
	conv := p.s.cfg.Conversations
	switch {
	case conv == nil:
		p.refuseChannel(dc, "off")
		return
	case p.mode != modeBrowser:
		p.refuseChannel(dc, "not_browser")
		return
	case dc.Label() != ConversationLabel:
		p.refuseChannel(dc, "label")
		return
	case dc.MaxRetransmits() != nil || dc.MaxPacketLifeTime() != nil:
		p.refuseChannel(dc, "unreliable")
		return
	}
	p.convMu.Lock()
	busy := p.conv
	p.conv = true
	p.convMu.Unlock()
	if busy {
		p.refuseChannel(dc, "second")
		return
	}
	release := func() {
		p.convMu.Lock()
		p.conv = false
		p.convMu.Unlock()
	}
	// The member is the peer's own, authenticated when its signalling
	// socket opened; nothing the channel says is taken for it.
	ctx, cancel := context.WithTimeout(p.ctx, attachTimeout)
	c, err := conv.Attach(ctx, p.session, p.member)
	cancel()
	if err != nil {
		release()
		p.s.log.Info("conversation channel refused", "session", p.session, "member", p.member, "err", err)
		p.refuseChannel(dc, "attach")
		return
	}
	p.s.m.channels.Inc()
	p.s.m.channelsOpened.Inc()
	var once sync.Once
	done := make(chan struct{})
	stop := func() {
		once.Do(func() {
			close(done)
			c.Close()
			_ = dc.Close()
			p.s.m.channels.Dec()
			release()
		})
	}
	dc.OnClose(stop)
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		if m.IsString {
			c.Text(m.Data)
		} else {
			c.Receive(m.Data)
		}
	})
	low := make(chan struct{}, 1)
	dc.SetBufferedAmountLowThreshold(dataLowWater)
	dc.OnBufferedAmountLow(func() {
		select {
		case low <- struct{}{}:
		default:
		}
	})
	dc.OnOpen(func() { go p.pumpConversation(dc, c, done, low, stop) })
	go func() { // a peer that hangs up before the channel opens
		select {
		case <-p.ctx.Done():
			stop()
		case <-done:
		}
	}()
}

// pumpConversation sends the conversation's frames to the channel until
// either ends or the peer hangs up.
func (p *Peer) pumpConversation(dc *webrtc.DataChannel, c DataConn, done <-chan struct{}, low <-chan struct{}, stop func()) {
	defer stop()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		b, bin, ok := c.Next(ctx)
		if !ok {
			return
		}
		for dc.BufferedAmount() > dataHighWater {
			select {
			case <-low:
			case <-ctx.Done():
				return
			}
		}
		var err error
		if bin {
			err = dc.Send(b)
		} else {
			err = dc.SendText(string(b))
		}
		if err != nil {
			return
		}
	}
}

// refuseChannel closes a channel the node does not take, counts it, and
// hangs up a peer that keeps opening them.
func (p *Peer) refuseChannel(dc *webrtc.DataChannel, reason string) {
	p.s.m.channelsRefused.WithLabelValues(reason).Inc()
	_ = dc.Close()
	if p.refusedDCs.Add(1) > maxRefusedChannels {
		p.s.m.refused.WithLabelValues("channel_flood").Inc()
		p.Close()
	}
}
