// Package rtctest is a WebRTC client of Convene's signalling protocol
// (docs/signalling.md), built on pion: tests and the benchmark's load
// client use it where a browser would be too heavy. It publishes synthetic
// Opus and VP8 packets (VP8 keyframes once a second, optionally three
// simulcast layers) and counts what it receives per remote track.
package rtctest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/transport/v5"
	"github.com/pion/transport/v5/stdnet"
	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/sfu"
)

// Options choose what a client publishes.
type Options struct {
	Audio, Video bool
	// Moves, when not zero, says the member was moved to this node
	// already (as the web app's socket does: ?moves=): it is not placed
	// on another node (sfu.Placed).
	Moves int
	// Simulcast publishes video as three layers (rids l, m, h) of about
	// 100, 300 and 900 kbit/s.
	Simulcast bool
	// Receive wraps the subscriber connection's interceptors (a bandwidth
	// cap in tests); nil for none.
	Receive interceptor.Factory
	// TCP makes the client use ICE over TCP only.
	TCP bool
	// Interface is the one network interface the client gathers host
	// candidates on ("" for lo).
	Interface string
	// Level, when not zero, is the audio level (-dBov, 1..127) the
	// client's audio packets carry in the RFC 6464 header extension.
	Level int
	// Tone, when not zero, makes the audio real Opus: a sine of this
	// frequency (Hz), as a browser's microphone would send, instead of
	// packets that carry their send time (no latency is measured then).
	Tone float64
	// Decode makes the client decode the Opus audio it receives, kept per
	// track (Recv.PCM) for tests that listen to what a browser hears.
	Decode bool
	// ReadBuffer, when not zero, is the receive buffer (SO_RCVBUF) of the
	// client's sockets: a load that receives video bursts in one process
	// gives its clients one as a browser's, so that the load's kernel
	// does not drop what the server sent in time (the default, 208 KiB on
	// Linux, holds about 90 packets of 1,200 bytes).
	ReadBuffer int
	// Arrivals makes the client note when each RTP packet reached its
	// sockets (the kernel's receive timestamp): Recv.Arrival then counts
	// latency to that moment, without the client process's own delay in
	// reading it (a load of many clients sharing a CPU).
	Arrivals bool
	// Conversation opens the "conversation" data channel (reliable,
	// unordered) on the publisher connection, as the web app does:
	// Client.Channel, open once Publish is done and the connection is up.
	Conversation bool
	// VideoCodecs, if set, are the only video codecs the client takes
	// (MIME types: a browser without H.264 takes only "video/VP8").
	VideoCodecs []string
	// OnVideo, if set, sees every video packet the client receives, with
	// its track's codec (a test writes them to a file ffprobe decodes).
	OnVideo func(codec string, p *rtp.Packet)
}

// Client is one member's signalling socket and peer connections.
type Client struct {
	opt    Options
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc

	Pub, Sub *webrtc.PeerConnection
	// Channel is the conversation data channel (Options.Conversation);
	// what it receives is on ChannelFrames.
	Channel *webrtc.DataChannel
	dcIn    chan webrtc.DataChannelMessage
	audio   *webrtc.TrackLocalStaticRTP
	video   []*webrtc.TrackLocalStaticRTP // one per layer

	arr *arrivals // with Options.Arrivals

	answers chan string
	frames  chan sfu.Frame
	welcome sfu.Frame

	mu           sync.Mutex
	recv         map[string]*Recv // by track ID
	tracks       []sfu.TrackDesc
	tracksFrames int // how many tracks frames came
	layers       map[string]string
	rrs          map[string]rtcp.ReceptionReport // the node's newest report on each published kind's (first) SSRC
	twccs        atomic.Uint64                   // transport-wide feedback packets the node sent the publisher
	errs         []sfu.Frame
	closed       websocket.StatusCode // how the node closed the socket (-1 before, or without a close frame)
}

// Recv counts one remote track's packets.
type Recv struct {
	Kind   string
	Stream string
	// Codec is the MIME type the track was negotiated with (audio/opus).
	Codec     string
	Packets   atomic.Uint64
	Bytes     atomic.Uint64
	Keyframes atomic.Uint64
	First     atomic.Int64 // unix nanos of the first packet
	LastSeq   atomic.Uint32
	// High is the highest sequence number seen, extended past wraps (the
	// first packet's is 1<<16): High - first + 1 is what was expected.
	High atomic.Int64
	// Latency counts packets by one-way delay in milliseconds (the last
	// bucket holds everything from LatencyBuckets-1 ms up), read from the
	// send time Media writes into each payload.
	Latency [LatencyBuckets]atomic.Uint32
	// Arrival counts them the same way by their delay to the moment they
	// reached the client's socket (Options.Arrivals; a packet whose
	// arrival was not noted counts by its Latency).
	Arrival [LatencyBuckets]atomic.Uint32
	// Reports are the sender reports of the track's SSRC the client read
	// (as a browser does; pion's receiver reports then carry the last
	// one's time back, and the sender learns the round trip).
	Reports atomic.Uint64
	last    atomic.Pointer[Report]
	mu      sync.Mutex
	pcm     []int16 // decoded 48 kHz audio, with Options.Decode
}

// Report is a sender report as it arrived: its content, when it did, and
// how many packets of the track had arrived by then.
type Report struct {
	rtcp.SenderReport
	At       time.Time
	Received uint64
}

// LastReport is the newest sender report of the track, nil before one.
func (r *Recv) LastReport() *Report { return r.last.Load() }

// maxDecoded bounds Recv.PCM: 20 s at 48 kHz.
const maxDecoded = 20 * 48000

// PCM returns a copy of the decoded audio (48 kHz mono), with
// Options.Decode; the newest maxDecoded samples.
func (r *Recv) PCM() []int16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int16(nil), r.pcm...)
}

// LatencyBuckets is the size of Recv.Latency.
const LatencyBuckets = 1000

// VideoStampAt is where Media writes the send time into a video packet's
// payload: after the VP8 descriptor and a keyframe's 10-byte header.
// An audio packet carries it at 0.
const VideoStampAt = 11

// StampAt is where a packet's payload carries its send time.
func StampAt(video bool) int {
	if video {
		return VideoStampAt
	}
	return 0
}

// Stamp writes the send time t into payload where Observe reads it
// (StampAt); payload must hold StampAt(video)+8 bytes.
func Stamp(payload []byte, video bool, t time.Time) {
	binary.BigEndian.PutUint64(payload[StampAt(video):], uint64(t.UnixNano()))
}

// VP8Header writes the start of a VP8 payload into pl (11 bytes at
// least): the payload descriptor (RFC 7741 §4.2), with the S bit on a
// frame's first packet, then on that packet the frame header (RFC 6386
// §9.1); a keyframe's has the start code and a 640x360 size, as a real
// encoder's, so SFUs that parse it (Janus) see keyframes.
func VP8Header(pl []byte, first, key bool) {
	copy(pl[1:11], []byte{0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0})
	pl[0] = 0
	if first {
		pl[0] = 0x10 // S bit, partition 0
		if key {
			copy(pl[1:11], []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0x68, 0x01})
		}
	}
}

// Observe counts one received RTP packet of this track.
func (r *Recv) Observe(p *rtp.Packet, n int, video bool) { r.observe(p, n, video, 0) }

// observe counts p, which reached the client's socket at arrived (unix
// nanos, 0 if not known).
func (r *Recv) observe(p *rtp.Packet, n int, video bool, arrived int64) {
	now := time.Now().UnixNano()
	r.First.CompareAndSwap(0, now)
	r.Packets.Add(1)
	r.Bytes.Add(uint64(n))
	r.LastSeq.Store(uint32(p.SequenceNumber))
	r.mu.Lock()
	h := r.High.Load()
	if h == 0 {
		r.High.Store(1<<16 | int64(p.SequenceNumber))
	} else if d := int16(p.SequenceNumber - uint16(h)); d > 0 {
		r.High.Store(h + int64(d))
	}
	r.mu.Unlock()
	off := StampAt(video)
	if video {
		if len(p.Payload) > 1 && p.Payload[0]&0x10 != 0 && p.Payload[0]&0x07 == 0 && p.Payload[1]&0x01 == 0 {
			r.Keyframes.Add(1)
		}
	}
	if len(p.Payload) >= off+8 {
		if sent := int64(binary.BigEndian.Uint64(p.Payload[off:])); sent > 0 && sent <= now && now-sent < int64(time.Minute) {
			ms := min((now-sent)/int64(time.Millisecond), LatencyBuckets-1)
			r.Latency[ms].Add(1)
			if arrived >= sent && arrived <= now {
				ms = min((arrived-sent)/int64(time.Millisecond), LatencyBuckets-1)
			}
			r.Arrival[ms].Add(1)
		}
	}
}

// Dial opens a member's signalling socket: base is the node's HTTP URL.
func Dial(ctx context.Context, base, sessionID, memberToken string, opt Options) (*Client, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/sessions/" + sessionID + "/rtc"
	if opt.Moves > 0 {
		u += "?moves=" + strconv.Itoa(opt.Moves)
	}
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + memberToken}}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(sfu.MaxFrame)
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{opt: opt, ws: ws, closed: -1, ctx: cctx, cancel: cancel, answers: make(chan string, 4), frames: make(chan sfu.Frame, 256),
		recv: map[string]*Recv{}, layers: map[string]string{}}
	if opt.Arrivals {
		c.arr = newArrivals()
	}
	if c.Sub, err = newPC(opt.Receive, opt, c.arr, false); err != nil {
		c.Close()
		return nil, err
	}
	c.Sub.OnTrack(c.onTrack)
	go c.read()
	select {
	case f := <-c.frames:
		if f.Type != "welcome" {
			c.Close()
			return nil, &FirstFrameError{Frame: f}
		}
		c.welcome = f
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

// A publisher's connection (send) puts transport-wide sequence numbers on
// what it sends, as a browser does, so that the node's feedback on them
// can be seen (TransportFeedback).
func newPC(recv interceptor.Factory, opt Options, arr *arrivals, send bool) (*webrtc.PeerConnection, error) {
	m := &webrtc.MediaEngine{}
	if err := registerCodecs(m, opt.VideoCodecs); err != nil {
		return nil, err
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.AudioLevelURI}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	reg := &interceptor.Registry{}
	if recv != nil {
		reg.Add(recv)
	}
	// pion's defaults without its stats interceptor: a browser's feedback
	// (NACKs, receiver reports, transport-wide CC) and nothing the tests
	// do not read, so the benchmark's load process costs less a packet.
	if err := webrtc.ConfigureNack(m, reg); err != nil {
		return nil, err
	}
	if err := webrtc.ConfigureRTCPReports(reg); err != nil {
		return nil, err
	}
	if err := webrtc.ConfigureSimulcastExtensionHeaders(m); err != nil {
		return nil, err
	}
	if err := webrtc.ConfigureTWCCSender(m, reg); err != nil {
		return nil, err
	}
	if send {
		hx, err := twcc.NewHeaderExtensionInterceptor()
		if err != nil {
			return nil, err
		}
		reg.Add(hx)
	}
	reg.Add(streamAttrsFactory{}) // last: the outermost of the receive chain
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	// Answer as browsers do: setup:active, the DTLS client (JSEP). pion's
	// own answer to an ICE-lite offerer would make it the server.
	if err := se.SetAnsweringDTLSRole(webrtc.DTLSRoleClient); err != nil {
		return nil, err
	}
	if _, ok := recv.(*Loss); ok {
		// Loss drops packets after SRTP saw them; a resent copy must not
		// be taken for a replay.
		se.DisableSRTPReplayProtection(true)
	}
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	if opt.TCP {
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeTCP4})
	}
	ifname := opt.Interface
	if ifname == "" {
		ifname = "lo"
	}
	se.SetInterfaceFilter(func(s string) bool { return s == ifname })
	if opt.ReadBuffer > 0 || arr != nil {
		n, err := stdnet.NewNet()
		if err != nil {
			return nil, err
		}
		se.SetNet(clientNet{Net: n, size: opt.ReadBuffer, arr: arr})
	}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se))
	return api.NewPeerConnection(webrtc.Configuration{})
}

// registerCodecs registers pion's default codecs, or with video only
// those of video.
func registerCodecs(m *webrtc.MediaEngine, video []string) error {
	if len(video) == 0 {
		return m.RegisterDefaultCodecs()
	}
	// pion's audio defaults, by payload type as it registers them.
	fb := []webrtc.RTCPFeedback{{Type: "goog-remb"}, {Type: "ccm", Parameter: "fir"}, {Type: "nack"}, {Type: "nack", Parameter: "pli"}}
	for _, c := range []webrtc.RTPCodecParameters{
		{PayloadType: 111, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"}},
		{PayloadType: 0, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypePCMU, ClockRate: 8000}},
		{PayloadType: 8, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypePCMA, ClockRate: 8000}},
	} {
		if err := m.RegisterCodec(c, webrtc.RTPCodecTypeAudio); err != nil {
			return err
		}
	}
	for _, mime := range video {
		c := webrtc.RTPCodecParameters{PayloadType: 96, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000, RTCPFeedback: fb}}
		if strings.EqualFold(mime, webrtc.MimeTypeH264) {
			c = webrtc.RTPCodecParameters{PayloadType: 102, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
				SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", RTCPFeedback: fb}}
		}
		if err := m.RegisterCodec(c, webrtc.RTPCodecTypeVideo); err != nil {
			return err
		}
	}
	return nil
}

// clientNet gives the sockets ICE gathers on a receive buffer of size
// (when not 0) and, with arr, notes their packets' arrivals.
type clientNet struct {
	*stdnet.Net
	size int
	arr  *arrivals
}

func (n clientNet) ListenUDP(network string, laddr *net.UDPAddr) (transport.UDPConn, error) {
	c, err := n.Net.ListenUDP(network, laddr)
	if err != nil {
		return c, err
	}
	if b, ok := c.(interface{ SetReadBuffer(int) error }); ok && n.size > 0 {
		_ = b.SetReadBuffer(n.size)
	}
	if n.arr != nil && (laddr == nil || laddr.Port != 5353) { // not mDNS's socket
		c = newStampedConn(c, n.arr)
	}
	return c, nil
}

// Close hangs up.
func (c *Client) Close() {
	c.cancel()
	if c.Pub != nil {
		c.Pub.Close()
	}
	if c.Sub != nil {
		c.Sub.Close()
	}
	if c.ws != nil {
		c.ws.CloseNow()
	}
}

// Send writes a raw frame (tests of bad input).
func (c *Client) Send(b []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

func (c *Client) sendFrame(f sfu.Frame) error {
	b, _ := json.Marshal(f)
	return c.Send(b)
}

// read handles the node's frames: subscriber offers are answered here,
// publisher answers go to Publish, the rest to Frames.
func (c *Client) read() {
	defer close(c.frames)
	for {
		_, b, err := c.ws.Read(c.ctx)
		if err != nil {
			c.mu.Lock()
			c.closed = websocket.CloseStatus(err)
			c.mu.Unlock()
			return
		}
		var f sfu.Frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Type {
		case "offer":
			if err := c.answer(f.SDP); err != nil {
				c.mu.Lock()
				c.errs = append(c.errs, sfu.Frame{Type: "error", Code: "client", Message: err.Error()})
				c.mu.Unlock()
			}
		case "answer":
			select {
			case c.answers <- f.SDP:
			default:
			}
		case "tracks":
			c.mu.Lock()
			c.tracks = f.Tracks
			c.tracksFrames++
			c.mu.Unlock()
		case "layer":
			c.mu.Lock()
			c.layers[f.Track] = f.Layer
			c.mu.Unlock()
		case "error":
			c.mu.Lock()
			c.errs = append(c.errs, f)
			c.mu.Unlock()
		}
		select {
		case c.frames <- f:
		default:
		}
	}
}

// CloseStatus is the close code the node's close frame had once the
// socket is closed (Frames is closed), -1 if it had none or is open.
func (c *Client) CloseStatus() websocket.StatusCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// TransportFeedback counts the transport-wide congestion control
// feedback packets the node sent on the client's published tracks, read
// while Media runs.
func (c *Client) TransportFeedback() uint64 { return c.twccs.Load() }

// ReceptionReport is the newest reception report the node sent on the
// client's published track of kind ("audio", "video"), read while Media
// runs; false before one.
func (c *Client) ReceptionReport(kind string) (rtcp.ReceptionReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.rrs[kind]
	return r, ok
}

// Frames are the node's frames (all of them, including handled ones);
// when nobody reads, new ones are dropped.
func (c *Client) Frames() <-chan sfu.Frame { return c.frames }

func (c *Client) answer(offer string) error {
	if err := c.Sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return err
	}
	ans, err := c.Sub.CreateAnswer(nil)
	if err != nil {
		return err
	}
	g := webrtc.GatheringCompletePromise(c.Sub)
	if err := c.Sub.SetLocalDescription(ans); err != nil {
		return err
	}
	<-g
	return c.sendFrame(sfu.Frame{Type: "answer", PC: "sub", SDP: c.Sub.LocalDescription().SDP})
}

// Publish offers the client's tracks and applies the node's answer.
func (c *Client) Publish(ctx context.Context) error {
	sdp, sources, err := c.offer()
	if err != nil {
		return err
	}
	if err := c.sendFrame(sfu.Frame{Type: "offer", PC: "pub", SDP: sdp, Sources: sources}); err != nil {
		return err
	}
	select {
	case ans := <-c.answers:
		return c.Pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: ans})
	case <-ctx.Done():
		return fmt.Errorf("no answer to the publisher offer: %w (errors: %v)", ctx.Err(), c.Errors())
	}
}

// offer makes the publisher connection and its offer.
func (c *Client) offer() (string, map[string]string, error) {
	var err error
	if c.Pub, err = newPC(nil, c.opt, nil, true); err != nil {
		return "", nil, err
	}
	sources := map[string]string{}
	if c.opt.Audio {
		c.audio, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", "pub")
		if _, err := c.Pub.AddTransceiverFromTrack(c.audio, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly}); err != nil {
			return "", nil, err
		}
	}
	if c.opt.Video {
		vc := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}
		if c.opt.Simulcast {
			for _, rid := range []string{"l", "m", "h"} {
				t, _ := webrtc.NewTrackLocalStaticRTP(vc, "video", "pub", webrtc.WithRTPStreamID(rid))
				c.video = append(c.video, t)
			}
			tr, err := c.Pub.AddTransceiverFromTrack(c.video[0], webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
			if err != nil {
				return "", nil, err
			}
			for _, t := range c.video[1:] {
				if err := tr.Sender().AddEncoding(t); err != nil {
					return "", nil, err
				}
			}
		} else {
			t, _ := webrtc.NewTrackLocalStaticRTP(vc, "video", "pub")
			c.video = append(c.video, t)
			if _, err := c.Pub.AddTransceiverFromTrack(t, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly}); err != nil {
				return "", nil, err
			}
		}
	}
	if c.opt.Conversation {
		ordered := false
		if c.Channel, err = c.Pub.CreateDataChannel(sfu.ConversationLabel, &webrtc.DataChannelInit{Ordered: &ordered}); err != nil {
			return "", nil, err
		}
		c.dcIn = make(chan webrtc.DataChannelMessage, 256)
		c.Channel.OnMessage(func(m webrtc.DataChannelMessage) {
			select {
			case c.dcIn <- m:
			case <-c.ctx.Done():
			}
		})
	}
	offer, err := c.Pub.CreateOffer(nil)
	if err != nil {
		return "", nil, err
	}
	g := webrtc.GatheringCompletePromise(c.Pub)
	if err := c.Pub.SetLocalDescription(offer); err != nil {
		return "", nil, err
	}
	<-g
	for _, tr := range c.Pub.GetTransceivers() {
		if tr.Kind() == webrtc.RTPCodecTypeVideo {
			sources[tr.Mid()] = "camera"
		} else {
			sources[tr.Mid()] = "microphone"
		}
	}
	return c.Pub.LocalDescription().SDP, sources, nil
}

// LocalTracks returns the tracks the client publishes (after Publish,
// WHIP or NewPublisher), for a caller that writes its own packets instead
// of Media's: the audio track (nil without Options.Audio) and the video
// track or its simulcast layers.
func (c *Client) LocalTracks() (audio *webrtc.TrackLocalStaticRTP, video []*webrtc.TrackLocalStaticRTP) {
	return c.audio, c.video
}

// SimulcastExtensions returns the published video's MID and the IDs of
// the MID and RID header extensions its packets carry: pion's sender
// writes neither itself (a browser does, and the node tells simulcast
// layers apart by them), so a caller that writes its own packets sets
// them (Media does).
func (c *Client) SimulcastExtensions() (mid string, midExt, ridExt uint8) {
	for _, tr := range c.Pub.GetTransceivers() {
		if tr.Kind() != webrtc.RTPCodecTypeVideo {
			continue
		}
		mid = tr.Mid()
		for _, h := range tr.Sender().GetParameters().HeaderExtensions {
			switch h.URI {
			case sdp.SDESMidURI:
				midExt = uint8(h.ID)
			case sdp.SDESRTPStreamIDURI:
				ridExt = uint8(h.ID)
			}
		}
	}
	return mid, midExt, ridExt
}

// ChannelFrames are the frames the conversation channel received
// (Options.Conversation), in the order they came.
func (c *Client) ChannelFrames() <-chan webrtc.DataChannelMessage { return c.dcIn }

// Welcome returns the node's first frame.
func (c *Client) Welcome() sfu.Frame { return c.welcome }

// Errors returns the error frames received so far.
func (c *Client) Errors() []sfu.Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sfu.Frame(nil), c.errs...)
}

// Tracks returns the last tracks frame's list.
func (c *Client) Tracks() []sfu.TrackDesc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sfu.TrackDesc(nil), c.tracks...)
}

// TracksFrames returns how many tracks frames came.
func (c *Client) TracksFrames() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tracksFrames
}

// Layer returns the layer the node last said it forwards for a track.
func (c *Client) Layer(track string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.layers[track]
}

// SetLayer asks for a simulcast layer of a remote track.
func (c *Client) SetLayer(track, layer string) error {
	return c.sendFrame(sfu.Frame{Type: "layer", Track: track, Layer: layer})
}

// Received returns the counters of every remote track, by track ID.
func (c *Client) Received() map[string]*Recv {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*Recv, len(c.recv))
	for k, v := range c.recv {
		out[k] = v
	}
	return out
}

func (c *Client) onTrack(t *webrtc.TrackRemote, rx *webrtc.RTPReceiver) {
	r := &Recv{Kind: t.Kind().String(), Stream: t.StreamID(), Codec: t.Codec().MimeType}
	c.mu.Lock()
	c.recv[t.ID()] = r
	c.mu.Unlock()
	go r.readReports(rx, uint32(t.SSRC()))
	var dec codec.Decoder
	var pcm []int16
	if c.opt.Decode && strings.EqualFold(r.Codec, webrtc.MimeTypeOpus) {
		dec, _ = codec.NewDecoder(codec.Opus)
		pcm = make([]int16, 5760)
	}
	buf := make([]byte, 1500)
	var p rtp.Packet
	for {
		n, _, err := t.Read(buf)
		if err != nil {
			return
		}
		if p.Unmarshal(buf[:n]) != nil {
			continue
		}
		var arrived int64
		if c.arr != nil {
			arrived = c.arr.at(p.SSRC, p.SequenceNumber)
		}
		r.observe(&p, n, t.Kind() == webrtc.RTPCodecTypeVideo, arrived)
		if c.opt.OnVideo != nil && t.Kind() == webrtc.RTPCodecTypeVideo {
			c.opt.OnVideo(r.Codec, &p)
		}
		if dec != nil {
			if k, err := dec.Decode(p.Payload, pcm); err == nil {
				r.mu.Lock()
				r.pcm = append(r.pcm, pcm[:k]...)
				if over := len(r.pcm) - maxDecoded; over > 0 {
					r.pcm = r.pcm[:copy(r.pcm, r.pcm[over:])]
				}
				r.mu.Unlock()
			}
		}
	}
}

// readReports reads the receiver's RTCP until it closes, keeping the
// sender reports of ssrc.
func (r *Recv) readReports(rx *webrtc.RTPReceiver, ssrc uint32) {
	for {
		pkts, _, err := rx.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			if sr, ok := p.(*rtcp.SenderReport); ok && sr.SSRC == ssrc {
				r.last.Store(&Report{SenderReport: *sr, At: time.Now(), Received: r.Packets.Load()})
				r.Reports.Add(1)
			}
		}
	}
}

// Media sends synthetic media until ctx ends: 20 ms Opus-sized audio
// packets and 30 frames/s of VP8 (a keyframe each second, and whenever the
// node asks with a PLI); each simulcast layer at its own size.
func (c *Client) Media(ctx context.Context) {
	kf := make(chan struct{}, 1)
	if c.Pub != nil {
		for _, s := range c.Pub.GetSenders() {
			go func(s *webrtc.RTPSender) {
				var kind string
				var ssrc uint32
				if t := s.Track(); t != nil {
					kind = t.Kind().String()
				}
				if e := s.GetParameters().Encodings; len(e) > 0 {
					ssrc = uint32(e[0].SSRC)
				}
				for {
					pk, _, err := s.ReadRTCP()
					if err != nil {
						return
					}
					for _, x := range pk {
						if _, ok := x.(*rtcp.TransportLayerCC); ok {
							c.twccs.Add(1)
						}
						if rr, ok := x.(*rtcp.ReceiverReport); ok {
							for _, r := range rr.Reports {
								if r.SSRC == ssrc {
									c.mu.Lock()
									if c.rrs == nil {
										c.rrs = map[string]rtcp.ReceptionReport{}
									}
									c.rrs[kind] = r
									c.mu.Unlock()
								}
							}
						}
						if strings.Contains(fmt.Sprintf("%T", x), "PictureLoss") {
							select {
							case kf <- struct{}{}:
							default:
							}
						}
					}
				}
			}(s)
		}
	}
	// pion's sender does not write the simulcast stream's MID and RID
	// header extensions itself; a browser does, and the node needs them.
	var midExt, ridExt uint8
	var mid string
	if c.opt.Simulcast && c.Pub != nil {
		mid, midExt, ridExt = c.SimulcastExtensions()
	}
	var levelExt uint8
	if c.opt.Level != 0 && c.Pub != nil {
		for _, tr := range c.Pub.GetTransceivers() {
			for _, h := range tr.Sender().GetParameters().HeaderExtensions {
				if tr.Kind() == webrtc.RTPCodecTypeAudio && h.URI == sdp.AudioLevelURI {
					levelExt = uint8(h.ID)
				}
			}
		}
	}
	audioT := time.NewTicker(20 * time.Millisecond)
	videoT := time.NewTicker(33 * time.Millisecond)
	defer audioT.Stop()
	defer videoT.Stop()
	var aseq, frame uint16
	vseq := make([]uint16, len(c.video))
	sizes := []int{400, 1200, 3600} // bytes per frame: ~100, 300, 900 kbit/s
	if len(c.video) == 1 {
		sizes = []int{2000}
	}
	payload := make([]byte, 1100) // the send time in the first bytes after the VP8 descriptor (audio: at 0)
	var tone codec.Encoder
	var phase float64
	pcm := make([]int16, 960)
	if c.opt.Tone > 0 {
		tone, _ = codec.NewEncoder(codec.Opus)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			return
		case now := <-audioT.C:
			if c.audio == nil {
				continue
			}
			aseq++
			Stamp(payload, false, time.Now())
			pk := &rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: aseq, Timestamp: uint32(now.UnixMilli() * 48),
				Marker: aseq == 1}, Payload: payload[:80]}
			if tone != nil {
				for i := range pcm {
					pcm[i] = int16(8000 * math.Sin(phase))
					phase += 2 * math.Pi * c.opt.Tone / 48000
				}
				n, err := tone.Encode(pcm, payload)
				if err != nil {
					continue
				}
				pk.Payload, pk.Timestamp = payload[:n], uint32(aseq)*960
			}
			if levelExt != 0 {
				_ = pk.Header.SetExtension(levelExt, []byte{0x80 | byte(c.opt.Level&0x7f)})
			}
			_ = c.audio.WriteRTP(pk)
		case now := <-videoT.C:
			frame++
			key := frame%30 == 1
			select {
			case <-kf:
				key = true
			default:
			}
			for i, t := range c.video {
				left := sizes[i]
				first := true
				for left > 0 {
					n := min(left, 1000)
					left -= n
					pl := payload[:max(n, VideoStampAt+8)+1]
					VP8Header(pl, first, key)
					Stamp(pl, true, time.Now())
					vseq[i]++
					pk := &rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: vseq[i], Timestamp: uint32(now.UnixMilli() * 90),
						Marker: left == 0}, Payload: pl}
					if midExt != 0 && ridExt != 0 {
						_ = pk.Header.SetExtension(midExt, []byte(mid))
						_ = pk.Header.SetExtension(ridExt, []byte(t.RID()))
					}
					_ = t.WriteRTP(pk)
					first = false
				}
			}
		}
	}
}

// WaitFor polls cond every 50 ms until it holds or ctx ends.
func WaitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// FirstFrameError is a join the node refused: the frame it sent first
// instead of a welcome (an error frame: its code, message and, over
// capacity in a cluster, the nodes with room).
type FirstFrameError struct{ Frame sfu.Frame }

func (e *FirstFrameError) Error() string {
	return fmt.Sprintf("first frame %q, want welcome (%s %s)", e.Frame.Type, e.Frame.Code, e.Frame.Message)
}
