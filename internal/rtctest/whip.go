package rtctest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pion/webrtc/v4"
)

// Resource is a WHIP or WHEP session's URL on the node.
type Resource struct {
	URL   string
	token string
}

// Delete hangs the resource up.
func (r Resource) Delete(ctx context.Context) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "DELETE", r.URL, nil)
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// post sends an SDP offer to a WHIP or WHEP endpoint and returns the answer.
func post(ctx context.Context, base, url, token, offer string) (string, Resource, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(offer))
	req.Header.Set("Content-Type", "application/sdp")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", Resource{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", Resource{}, fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	return string(b), Resource{URL: base + resp.Header.Get("Location"), token: token}, nil
}

// WHIP publishes over WHIP (RFC 9725) to session sid with a bearer token:
// a Client with only a publisher connection; call Media to send.
func WHIP(ctx context.Context, base, sid, token string, opt Options) (*Client, Resource, error) {
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{opt: opt, ctx: cctx, cancel: cancel, recv: map[string]*Recv{}, layers: map[string]string{}}
	sdp, _, err := c.offer()
	if err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	ans, res, err := post(ctx, base, base+"/api/v1/sessions/"+sid+"/whip", token, sdp)
	if err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	if err := c.Pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: ans}); err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	return c, res, nil
}

// WHEP watches session sid over WHEP: a Client with only a subscriber
// connection (one audio and one video track); query is appended to the
// URL (e.g. "member=m_…").
func WHEP(ctx context.Context, base, sid, token, query string) (*Client, Resource, error) {
	cctx, cancel := context.WithCancel(context.Background())
	// A viewer decodes the audio it hears, so tests can listen to it.
	c := &Client{ctx: cctx, cancel: cancel, recv: map[string]*Recv{}, layers: map[string]string{}, opt: Options{Decode: true}}
	var err error
	if c.Sub, err = newPC(nil, Options{}, nil, false); err != nil {
		return nil, Resource{}, err
	}
	c.Sub.OnTrack(c.onTrack)
	for _, k := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeAudio, webrtc.RTPCodecTypeVideo} {
		if _, err := c.Sub.AddTransceiverFromKind(k, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			c.Close()
			return nil, Resource{}, err
		}
	}
	offer, err := c.Sub.CreateOffer(nil)
	if err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	g := webrtc.GatheringCompletePromise(c.Sub)
	if err := c.Sub.SetLocalDescription(offer); err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	<-g
	u := base + "/api/v1/sessions/" + sid + "/whep"
	if query != "" {
		u += "?" + query
	}
	ans, res, err := post(ctx, base, u, token, c.Sub.LocalDescription().SDP)
	if err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	if err := c.Sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: ans}); err != nil {
		c.Close()
		return nil, Resource{}, err
	}
	return c, res, nil
}
