package sfu

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/interceptor/pkg/gcc"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/transcode"
	"github.com/convene/convene/internal/udpmux"
	"github.com/convene/convene/internal/vtranscode"
)

// Config is the node's WebRTC configuration (the webrtc section).
type Config struct {
	// Addr is the IP address media is received on; candidates name it (or
	// PublicIPs in its place).
	Addr netip.Addr
	// UDPPort, when not zero, puts every peer connection on this one UDP
	// port (single-port mode); zero gives each connection its own port
	// from PortMin..PortMax.
	UDPPort          int
	PortMin, PortMax uint16
	// TCPPort, when not zero, also accepts ICE over TCP on this port
	// (RFC 6544 passive candidates), for networks that block UDP.
	TCPPort int
	// PublicIPs replace the host address in candidates (a node behind
	// 1:1 NAT).
	PublicIPs []string
	// ICEServers (STUN and TURN) are handed to clients.
	ICEServers []ICEServer
	// MaxPeers caps the node's peer connections (a browser has two);
	// MaxTracks caps the tracks one peer may publish.
	MaxPeers  int
	MaxTracks int
	// Queue bounds the packets queued towards one subscriber.
	Queue int
	// NoDirectAudio keeps subscribers' audio on pion's send chain instead
	// of the direct path (direct.go): an escape hatch, and the benchmark's
	// A/B switch.
	NoDirectAudio bool
	// MaxBitrate caps the bandwidth estimate of a subscriber, bit/s.
	MaxBitrate int
	// Transcode, if set, gives browsers a G.711 track (a phone's) as Opus,
	// transcoded once per track; without it they get the G.711.
	Transcode *transcode.Hub
	// Video, if set, gives a receiver a camera of a codec it cannot take
	// (an H.264-only WHEP viewer, a VP8 publisher) through a video
	// transcoder of the codec, size and rate it takes; without it such a
	// receiver gets nothing of that camera.
	Video *vtranscode.Hub
	// Admit, if set, decides whether a browser's join, a WHIP publisher
	// or a WHEP viewer fits the node's capacity (session.Service.Admit):
	// the member, what ("join", "whip", "whep"), and whether it receives
	// the session's tracks and sends its own.
	Admit func(sessionID, memberID, what string, recv, send bool) error
	// Shed, if set, is the node's shed level now
	// (capacity.Governor.Level); shed.go applies it.
	Shed func() capacity.Level
	// Conversations, if set, lets a browser member carry its session's
	// conversation over a "conversation" data channel (datachan.go);
	// without it every data channel is refused.
	Conversations Conversations
	// Failover, if set, names the other nodes of the cluster a member may
	// rejoin on if this node goes (issue 16): the welcome frame carries
	// them, and a "nodes" frame whenever they changed (checked every
	// FailoverRefresh).
	Failover func() []capacity.Alternative
	// Place, if set, tells where a browser member of a session should
	// meet instead of here, if anywhere (issue 16: the session's owner,
	// near and with room); the member is sent there (place.go).
	Place  func(sessionID string) (capacity.Alternative, bool)
	Logger *slog.Logger
}

// FailoverRefresh is how often a member's socket is sent the cluster's
// nodes again if they changed (Config.Failover).
const FailoverRefresh = 10 * time.Second

func (c *Config) defaults() {
	if !c.Addr.IsValid() {
		c.Addr = netip.MustParseAddr("127.0.0.1")
	}
	if c.PortMin == 0 && c.PortMax == 0 {
		c.PortMin, c.PortMax = 50000, 50999
	}
	if c.MaxPeers <= 0 {
		c.MaxPeers = 1000
	}
	if c.MaxTracks <= 0 {
		c.MaxTracks = 8
	}
	if c.Queue <= 0 {
		c.Queue = 1024
	}
	if c.MaxBitrate <= 0 {
		c.MaxBitrate = 6_000_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// readBuffer is the single UDP port's receive buffer.
const readBuffer = 32 << 20

// Codecs the node negotiates, by payload type as browsers use them.
var (
	codecOpus = webrtc.RTPCodecParameters{PayloadType: 111, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"}}
	codecPCMU = webrtc.RTPCodecParameters{PayloadType: 0, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypePCMU, ClockRate: 8000, Channels: 1}}
	codecPCMA = webrtc.RTPCodecParameters{PayloadType: 8, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypePCMA, ClockRate: 8000, Channels: 1}}
	videoFeedback = []webrtc.RTCPFeedback{{Type: "goog-remb"}, {Type: "transport-cc"}, {Type: "ccm", Parameter: "fir"},
		{Type: "nack"}, {Type: "nack", Parameter: "pli"}}
	codecVP8  = webrtc.RTPCodecParameters{PayloadType: 96, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000, RTCPFeedback: videoFeedback}}
	codecH264 = webrtc.RTPCodecParameters{PayloadType: 102, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", RTCPFeedback: videoFeedback}}
	codecH264High = webrtc.RTPCodecParameters{PayloadType: 104, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f", RTCPFeedback: videoFeedback}}
	codecs = []webrtc.RTPCodecParameters{codecOpus, codecPCMU, codecPCMA, codecVP8, codecH264, codecH264High}
)

const audioLevelURI = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"

// codecFor returns the node's codec for a track: by the MIME type its
// publisher gave, else by the first packet's payload type (a plain RTP
// endpoint: 0 PCMU, 8 PCMA, other audio Opus, video VP8).
func codecFor(mime string, audio bool, pt uint8, havePT bool) (webrtc.RTPCodecCapability, bool) {
	if mime == "" {
		if !havePT {
			return webrtc.RTPCodecCapability{}, false
		}
		switch {
		case audio && pt == 0:
			mime = webrtc.MimeTypePCMU
		case audio && pt == 8:
			mime = webrtc.MimeTypePCMA
		case audio:
			mime = webrtc.MimeTypeOpus
		default:
			mime = webrtc.MimeTypeVP8
		}
	}
	for _, c := range codecs {
		if strings.EqualFold(c.MimeType, mime) {
			return c.RTPCodecCapability, true
		}
	}
	return webrtc.RTPCodecCapability{}, false
}

// engine builds peer connections: one webrtc.API per connection, so each
// subscriber gets its own bandwidth estimator.
type engine struct {
	cfg     Config
	setting webrtc.SettingEngine
	udp     net.PacketConn // single-port mode
	batch   *batchConn     // udp's writes in bursts (IPv4 single-port mode)
	tcp     net.Listener   // ICE-TCP
}

func newEngine(cfg Config) (*engine, error) {
	e := &engine{cfg: cfg}
	s := webrtc.SettingEngine{}
	s.SetLite(true)
	lf := pionLogs{cfg.Logger}
	s.LoggerFactory = lf
	addr := cfg.Addr
	if addr.IsLoopback() {
		s.SetIncludeLoopbackCandidate(true)
	}
	if !addr.IsUnspecified() {
		s.SetIPFilter(func(ip net.IP) bool {
			a, ok := netip.AddrFromSlice(ip)
			return ok && a.Unmap() == addr
		})
	}
	s.SetICETimeouts(5*time.Second, 15*time.Second, 2*time.Second)
	if len(cfg.PublicIPs) > 0 {
		s.SetNAT1To1IPs(cfg.PublicIPs, webrtc.ICECandidateTypeHost)
	}
	nets := []webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6}
	if cfg.UDPPort != 0 {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(cfg.UDPPort))))
		if err != nil {
			return nil, fmt.Errorf("webrtc udp port: %w", err)
		}
		// Every connection's packets share this socket: give it the
		// buffers a few hundred peers' bursts need, the receive buffer as
		// the plain RTP port's (32 MiB, past net.core.rmem_max where the
		// process may: about 0.2 s of 100 publishers' 5 Mb/s video, what
		// carries the one reader through the moments a busy machine does
		// not run it); the send buffer up to net.core.wmem_max.
		udpmux.SetReadBuffer(c, readBuffer)
		_ = c.SetWriteBuffer(8 << 20)
		dontFragment(c)
		e.udp = c
		var mc net.PacketConn = c
		if addr.Is4() && !addr.IsUnspecified() {
			e.batch = newBatchConn(c)
			if !cfg.NoDirectAudio {
				e.batch.in = newDirectIn()
			}
			mc = e.batch
		}
		s.SetICEUDPMux(webrtc.NewICEUDPMux(lf.NewLogger("udpmux"), mc))
	} else if err := s.SetEphemeralUDPPortRange(cfg.PortMin, cfg.PortMax); err != nil {
		return nil, fmt.Errorf("webrtc port range: %w", err)
	}
	if cfg.TCPPort != 0 {
		l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(cfg.TCPPort))))
		if err != nil {
			e.close()
			return nil, fmt.Errorf("webrtc tcp port: %w", err)
		}
		e.tcp = l
		s.SetICETCPMux(webrtc.NewICETCPMux(lf.NewLogger("tcpmux"), l, 64))
		nets = append(nets, webrtc.NetworkTypeTCP4, webrtc.NetworkTypeTCP6)
	}
	s.SetNetworkTypes(nets)
	// Data channels (SCTP over DTLS, on by default in pion): a message of
	// at most MaxDataMessage (advertised as the SDP's max-message-size; a
	// larger one closes its channel), and a receive window of
	// dataReceiveBuffer per connection instead of pion's 1 MiB.
	s.SetSCTPMaxMessageSize(MaxDataMessage)
	s.SetSCTPMaxReceiveBufferSize(dataReceiveBuffer)
	e.setting = s
	return e, nil
}

func (e *engine) close() {
	if e.udp != nil {
		e.udp.Close()
	}
	if e.tcp != nil {
		e.tcp.Close()
	}
}

// directIn is a new publisher connection's part of the direct path for
// audio (direct_in.go), nil where there is none.
func (e *engine) directIn() *directPub {
	if e.batch == nil || e.batch.in == nil {
		return nil
	}
	return &directPub{in: e.batch.in, keys: &dtlsKeys{}}
}

// direct is a new subscriber connection's direct path for audio
// (direct.go), nil where there is none: without the single IPv4 UDP port's
// batching socket, or turned off.
func (e *engine) direct() *directOut {
	if e.batch == nil || e.cfg.NoDirectAudio {
		return nil
	}
	return &directOut{keys: &dtlsKeys{}, conn: e.batch}
}

// hold and release bracket a writer goroutine's burst of writes, which
// then leave in sendmmsg batches (batchConn); without batching they do
// nothing.
func (e *engine) hold() {
	if e.batch != nil {
		e.batch.hold()
	}
}

func (e *engine) release() {
	if e.batch != nil {
		e.batch.release()
	}
}

// dontFragment sets DF on what the single-port socket sends, as the plain
// RTP socket does (udpmux): WebRTC keeps its datagrams under 1,200 bytes
// of payload for any path, and the kernel then skips the hashed IP ID it
// computes per fragmentable datagram.
func dontFragment(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
	})
}

// UDPPort returns the single UDP port in use (0 if none).
func (e *engine) udpPort() int {
	if e.udp == nil {
		return 0
	}
	return e.udp.LocalAddr().(*net.UDPAddr).Port
}

func (e *engine) tcpPort() int {
	if e.tcp == nil {
		return 0
	}
	return e.tcp.Addr().(*net.TCPAddr).Port
}

// newPC returns a peer connection. A subscriber connection (estimate set)
// also estimates its bandwidth with GCC over TWCC feedback and hands the
// estimator to estimate.
//
// A subscriber connection with out (its direct path) sends video through
// pion's interceptors and then the direct way (directVideo), audio the
// direct way at once (localTrack.write). A publisher connection with in
// (its direct path) answers as the DTLS server, asks for transport-wide
// feedback on video only and sends that feedback and its NACKs itself
// (feedback.go).
func (e *engine) newPC(estimate func(cc.BandwidthEstimator), out *directOut, in *directPub) (*webrtc.PeerConnection, error) {
	m := &webrtc.MediaEngine{}
	for _, c := range codecs {
		typ := webrtc.RTPCodecTypeVideo
		if strings.HasPrefix(c.MimeType, "audio/") {
			typ = webrtc.RTPCodecTypeAudio
		}
		if err := m.RegisterCodec(c, typ); err != nil {
			return nil, err
		}
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: audioLevelURI}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	reg := &interceptor.Registry{}
	var keys *dtlsKeys
	if out != nil {
		keys = out.keys
		reg.Add(directVideo{out}) // added first: the innermost writer, in place of pion's SRTP
	}
	if estimate != nil {
		f, err := cc.NewInterceptor(func() (cc.BandwidthEstimator, error) {
			return gcc.NewSendSideBWE(gcc.SendSideBWEInitialBitrate(1_000_000), gcc.SendSideBWEMaxBitrate(e.cfg.MaxBitrate),
				gcc.SendSideBWEPacer(gcc.NewNoOpPacer()))
		})
		if err != nil {
			return nil, err
		}
		f.OnNewPeerConnection(func(_ string, est cc.BandwidthEstimator) { estimate(est) })
		reg.Add(videoOnly{f})
		// Transport-wide sequence numbers on video only: the estimate
		// exists to pick simulcast layers, and audio packets would cost
		// a history entry and feedback each for nothing to choose.
		if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.TransportCCURI}, webrtc.RTPCodecTypeVideo); err != nil {
			return nil, err
		}
		hx, err := twcc.NewHeaderExtensionInterceptor()
		if err != nil {
			return nil, err
		}
		reg.Add(hx)
	}
	// A subscriber connection answers NACKs itself (downTrack.resend, from
	// packets shared by every subscriber); a publisher connection sends
	// them with pion's generator, or with a direct path its own
	// (feedback.go).
	if estimate == nil && in == nil {
		if err := webrtc.ConfigureNack(m, reg); err != nil {
			return nil, err
		}
	}
	// A publisher connection reports what it receives with pion's
	// interceptors (for the tracks that went direct with what the direct
	// path counted: directReports, which wraps the writer they are given);
	// a subscriber connection receives no RTP, and the SFU sends its
	// sender reports itself (report.go).
	if estimate == nil {
		if in != nil {
			reg.Add(directReports{in})
		}
		if err := webrtc.ConfigureRTCPReports(reg); err != nil {
			return nil, err
		}
	}
	if estimate != nil {
		reg.Add(pooledAttrsFactory{}) // added last: the outermost writer
	}
	if estimate == nil {
		if err := webrtc.ConfigureSimulcastExtensionHeaders(m); err != nil {
			return nil, err
		}
		if err := configureTWCCFeedback(m, reg, in); err != nil {
			return nil, err
		}
	}
	setting := e.setting
	if in != nil {
		keys = in.keys
		// The node as the DTLS server of a browser's publisher connection
		// too (its answer says setup:passive), so that keys.go learns the
		// keys the browser's audio is encrypted with.
		if err := setting.SetAnsweringDTLSRole(webrtc.DTLSRoleServer); err != nil {
			return nil, err
		}
	}
	if keys != nil { // the direct path's keys (keys.go)
		setting.SetDTLSKeyLogWriter(keys)
		setting.SetDTLSServerHelloMessageHook(keys.serverHello)
	}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(setting))
	var conf webrtc.Configuration
	if out != nil {
		// The direct path encrypts header extensions as plain SRTP does
		// (localContext), so the node's offer does not ask for them to be
		// encrypted (RFC 9335 cryptex). What it sends subscribers in them
		// is its own transport-wide sequence numbers on video, nothing of
		// the publishers' (no audio levels).
		conf.RTPHeaderEncryptionPolicy = webrtc.RTPHeaderEncryptionPolicyDisable
	}
	return api.NewPeerConnection(conf)
}

// configureTWCCFeedback makes a publisher connection send transport-wide
// congestion control feedback (the browser's send-side estimate runs on
// it). Without a direct path, pion's interceptor sends it, on audio and
// video (pion's default). With in, the connection's direct path, its own
// feedback does, with the NACKs (feedback.go), and on video only: the
// video's packets are few and large, the audio's many and small, and the
// estimate is for the video's sake.
func configureTWCCFeedback(m *webrtc.MediaEngine, reg *interceptor.Registry, in *directPub) error {
	if in == nil {
		return webrtc.ConfigureTWCCSender(m, reg)
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.TransportCCURI}, webrtc.RTPCodecTypeVideo); err != nil {
		return err
	}
	reg.Add(feedbackFactory{in}) // the codecs carry transport-cc and nack (videoFeedback)
	return nil
}

// videoOnly makes an interceptor factory's interceptors (the bandwidth
// estimator) leave audio streams alone.
type videoOnly struct{ f interceptor.Factory }

func (v videoOnly) NewInterceptor(id string) (interceptor.Interceptor, error) {
	i, err := v.f.NewInterceptor(id)
	if err != nil {
		return nil, err
	}
	return videoStreams{i}, nil
}

type videoStreams struct{ interceptor.Interceptor }

func isAudio(info *interceptor.StreamInfo) bool {
	return strings.HasPrefix(strings.ToLower(info.MimeType), "audio/")
}

func (v videoStreams) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	if isAudio(info) {
		return w
	}
	return v.Interceptor.BindLocalStream(info, w)
}

func (v videoStreams) UnbindLocalStream(info *interceptor.StreamInfo) {
	if !isAudio(info) {
		v.Interceptor.UnbindLocalStream(info)
	}
}
