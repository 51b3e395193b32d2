package recbench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/pion/rtp"

	"github.com/convene/convene/internal/rtctest"
)

// PlainSystem is Convene recording streams that arrive as plain RTP, the
// way Voyager's streams came: each stream an RTP sender of its own (a
// link of the session, as an RTP tool or a gateway would add), each room's
// listener a plain RTP link that receives every stream. No SRTP, no ICE:
// what is left is the broker, the recorder and the kernel. Janus's
// VideoRoom takes WebRTC publishers only, so this series has no Janus
// beside it; the WebRTC series is the comparison with Janus.
const PlainSystem = "convene-rtp"

// plainRecorder is a `convene serve` node whose rooms are fed over plain
// RTP: the same node and recording API as conveneRecorder.
type plainRecorder struct {
	*conveneRecorder
	rtp *net.UDPAddr // the node's RTP port, where every link sends
}

func startPlain(cfg Config, dir string) (*plainRecorder, error) {
	c, err := startConvene(cfg, dir)
	if err != nil {
		return nil, err
	}
	var node struct {
		RTPAddr string `json:"rtp_addr"`
	}
	if err := c.n.API("GET", "/api/v1/node", nil, &node); err != nil {
		c.stop()
		return nil, err
	}
	a, err := netip.ParseAddrPort(node.RTPAddr)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("the node's rtp_addr %q: %w", node.RTPAddr, err)
	}
	return &plainRecorder{conveneRecorder: c, rtp: net.UDPAddrFromAddrPort(a)}, nil
}

// plainCodec is what a plain link's payload type carries, in rtpmap
// spelling, as the link declares it.
func plainCodec(video bool) (pt uint8, codec, kind string) {
	if video {
		return 96, "VP8/90000", "video"
	}
	return 111, "opus/48000/2", "audio"
}

func (c *plainRecorder) addRoom(ctx context.Context, id int, ss []*stream) (liveListener, error) {
	var s struct{ ID string }
	if err := c.n.API("POST", "/api/v1/sessions", map[string]string{"name": "rec-rtp-" + strconv.Itoa(id)}, &s); err != nil {
		return nil, err
	}
	links := "/api/v1/sessions/" + s.ID + "/rtp-links"
	for _, st := range ss {
		pt, codec, kind := plainCodec(st.shape.Video)
		snd, err := newRTPSender(c.rtp, pt, 0x5ec00000|st.id)
		if err != nil {
			return nil, err
		}
		st.close = snd.close
		// rtcp_mux: the node's RTCP for this sender comes back to its
		// one socket (which reads nothing), not to a next port that may
		// be someone else's.
		if err := c.n.API("POST", links, map[string]any{"remote": snd.addr(), "kind": kind, "direction": "sendonly",
			"rtcp_mux": true, "codec": codec}, nil); err != nil {
			return nil, fmt.Errorf("sender %d's link: %w", st.id, err)
		}
		st.track = snd
	}
	if err := c.n.API("POST", "/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "bench"}, nil); err != nil {
		return nil, err
	}
	video := len(ss) > 0 && ss[0].shape.Video
	l, err := newPlainListener(video)
	if err != nil {
		return nil, err
	}
	_, codec, kind := plainCodec(video)
	if err := c.n.API("POST", links, map[string]any{"remote": l.addr(), "kind": kind, "direction": "recvonly",
		"rtcp_mux": true, "codec": codec}, nil); err != nil {
		l.Close()
		return nil, fmt.Errorf("listener's link: %w", err)
	}
	return l, nil
}

// rtpSender sends one stream's packets from a socket of its own, with its
// own SSRC and payload type, as an RTP tool would.
type rtpSender struct {
	conn *net.UDPConn
	to   *net.UDPAddr
	pt   uint8
	ssrc uint32
	buf  []byte
}

func newRTPSender(to *net.UDPAddr, pt uint8, ssrc uint32) (*rtpSender, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &rtpSender{conn: conn, to: to, pt: pt, ssrc: ssrc, buf: make([]byte, 1500)}, nil
}

func (s *rtpSender) addr() string { return s.conn.LocalAddr().String() }
func (s *rtpSender) close()       { s.conn.Close() }

// WriteRTP sends p with the sender's payload type and SSRC. Only the
// stream's pump worker calls it.
func (s *rtpSender) WriteRTP(p *rtp.Packet) error {
	p.PayloadType, p.SSRC = s.pt, s.ssrc
	n, err := p.MarshalTo(s.buf)
	if err != nil {
		return err
	}
	_, err = s.conn.WriteToUDP(s.buf[:n], s.to)
	return err
}

// plainListener is a room's live listener over plain RTP: it reads what
// its link receives and counts each SSRC's packets, expected packets and
// latency as rtctest's WebRTC listener does (rtctest.Recv.Observe), so
// both transports are held to one bar.
type plainListener struct {
	conn  *net.UDPConn
	video bool
	mu    sync.Mutex
	recv  map[uint32]*rtctest.Recv
	done  chan struct{}
}

func newPlainListener(video bool) (*plainListener, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	_ = conn.SetReadBuffer(listenerBuffer)
	l := &plainListener{conn: conn, video: video, recv: map[uint32]*rtctest.Recv{}, done: make(chan struct{})}
	go l.read()
	return l, nil
}

func (l *plainListener) addr() string { return l.conn.LocalAddr().String() }

func (l *plainListener) read() {
	defer close(l.done)
	b := make([]byte, 2048)
	var p rtp.Packet
	for {
		n, err := l.conn.Read(b)
		if err != nil {
			return
		}
		// RTCP (the node's sender reports, muxed): payload types 200–204
		// sit where RTP's marker bit and payload type are.
		if n < 12 || (b[1] >= 200 && b[1] <= 204) {
			continue
		}
		if p.Unmarshal(b[:n]) != nil {
			continue
		}
		l.mu.Lock()
		r := l.recv[p.SSRC]
		if r == nil {
			r = &rtctest.Recv{Kind: "audio", Stream: strconv.FormatUint(uint64(p.SSRC), 10)}
			if l.video {
				r.Kind = "video"
			}
			l.recv[p.SSRC] = r
		}
		l.mu.Unlock()
		r.Observe(&p, n, l.video)
	}
}

// Received is what the listener got, by SSRC.
func (l *plainListener) Received() map[string]*rtctest.Recv {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*rtctest.Recv, len(l.recv))
	for k, v := range l.recv {
		out[strconv.FormatUint(uint64(k), 10)] = v
	}
	return out
}

func (l *plainListener) Close() {
	l.conn.Close()
	<-l.done
}

// drops: what the recorder did not record, and what the node dropped of
// its plain links' media (convene_media_dropped_packets_total, every
// reason), the plain path's counterpart of the SFU's forwarding drops.
func (c *plainRecorder) drops() (recorder, forwarding float64) {
	recorder, ok := c.n.Metric("convene_recorder_dropped_packets_total")
	if !ok {
		return -1, -1
	}
	forwarding, _ = c.n.Metric("convene_media_dropped_packets_total")
	return recorder, forwarding
}

// delay: the plain path keeps no histogram of its own forwarding delay.
func (c *plainRecorder) delay() map[float64]float64 { return nil }
