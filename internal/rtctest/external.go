package rtctest

import (
	"context"

	"github.com/pion/webrtc/v4"
)

// NewPublisher makes a client that publishes opt's tracks to some other
// server: it returns the offer to send there; SetAnswer applies the answer,
// then Media sends.
func NewPublisher(opt Options) (*Client, string, error) {
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{opt: opt, ctx: cctx, cancel: cancel, recv: map[string]*Recv{}, layers: map[string]string{}}
	sdp, _, err := c.offer()
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return c, sdp, nil
}

// SetAnswer applies a server's answer to the publisher connection.
func (c *Client) SetAnswer(sdp string) error {
	return c.Pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp})
}

// NewViewer makes a client that only receives, from a server that offers
// (a Janus subscriber): AnswerOffer answers the server's offer.
func NewViewer(opt Options) (*Client, error) {
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{opt: opt, ctx: cctx, cancel: cancel, recv: map[string]*Recv{}, layers: map[string]string{}}
	if opt.Arrivals {
		c.arr = newArrivals()
	}
	var err error
	if c.Sub, err = newPC(nil, opt, c.arr, false); err != nil {
		cancel()
		return nil, err
	}
	c.Sub.OnTrack(c.onTrack)
	return c, nil
}

// AnswerOffer applies a server's offer on the subscriber connection and
// returns the answer, with its candidates.
func (c *Client) AnswerOffer(offer string) (string, error) {
	if err := c.Sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return "", err
	}
	ans, err := c.Sub.CreateAnswer(nil)
	if err != nil {
		return "", err
	}
	g := webrtc.GatheringCompletePromise(c.Sub)
	if err := c.Sub.SetLocalDescription(ans); err != nil {
		return "", err
	}
	<-g
	return c.Sub.LocalDescription().SDP, nil
}
