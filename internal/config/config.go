// Package config defines the configuration of a convene node and loads it
// from layered sources.
//
// A configuration is built from, in increasing order of precedence:
//
//  1. the built-in defaults (Default),
//  2. one YAML file (see config/convene.sample.yaml for every key),
//  3. environment variables named CONVENE_ + the upper-cased YAML path with
//     dots replaced by underscores (rtp.port -> CONVENE_RTP_PORT),
//  4. command-line flags named after the YAML path with dots and
//     underscores replaced by dashes (rtp.port -> -rtp-port).
//
// Environment variable and flag names are derived from the yaml struct tags by
// reflection, so adding a field to Config makes it configurable everywhere.
// Values are Go-syntax strings everywhere: integers in base 10, booleans as
// accepted by strconv.ParseBool, durations as accepted by time.ParseDuration.
//
// Load returns the merged, validated configuration without derived values;
// call Config.Resolved before use to fill the node ID and catalog DSN.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"
)

// Config is the complete configuration of a convene node.
type Config struct {
	// NodeID identifies this node in the cluster. Empty means the hostname
	// (filled in by Resolved).
	NodeID string `yaml:"node_id"`
	// DataDir holds persistent node state, e.g. the SQLite catalog.
	DataDir string        `yaml:"data_dir"`
	HTTP    HTTPConfig    `yaml:"http"`
	RTP     RTPConfig     `yaml:"rtp"`
	Relay   RelayConfig   `yaml:"relay"`
	WebRTC  WebRTCConfig  `yaml:"webrtc"`
	SIP     SIPConfig     `yaml:"sip"`
	NATS    NATSConfig    `yaml:"nats"`
	Catalog CatalogConfig `yaml:"catalog"`
	Auth    AuthConfig    `yaml:"auth"`
	// Sessions caps what the session service holds.
	Sessions SessionsConfig `yaml:"sessions"`
	Links    LinksConfig    `yaml:"links"`
	Mixer    MixerConfig    `yaml:"mixer"`
	// Capacity is the node's delivery capacity: admission and shedding.
	Capacity CapacityConfig `yaml:"capacity"`
	// Recording configures the recordings of sessions.
	Recording RecordingConfig `yaml:"recording"`
	// Streaming configures HLS for passive viewers and thumbnails.
	Streaming StreamingConfig `yaml:"streaming"`
	// Composite configures the video composites (package composite).
	Composite CompositeConfig `yaml:"composite"`
	// VTranscode configures the video transcoders (package vtranscode).
	VTranscode VTranscodeConfig `yaml:"vtranscode"`
	Log        LogConfig        `yaml:"log"`
	// HeartbeatInterval is how often the node announces itself.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// ShutdownTimeout bounds graceful shutdown.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
}

// HTTPConfig configures the HTTP API / signalling listener.
type HTTPConfig struct {
	// Addr is the host:port to listen on.
	Addr string `yaml:"addr"`
	// PublicURL is the base URL clients reach the API and web app at
	// ("https://node-a.example.org"), which other nodes of a cluster name
	// when they refuse a client over capacity. Empty: http://<addr> when
	// addr is a specific IP, else none.
	PublicURL string `yaml:"public_url"`
	// Pprof serves Go's profiler under /debug/pprof/ (for benchmarks).
	Pprof bool `yaml:"pprof"`
	// MetricsToken is a bearer token that may read /metrics besides the
	// operator's API key.
	MetricsToken string `yaml:"metrics_token"`
	// RequestTimeout bounds reading a request body and writing its answer;
	// IdleTimeout closes an idle keep-alive connection.
	RequestTimeout Duration `yaml:"request_timeout"`
	IdleTimeout    Duration `yaml:"idle_timeout"`
	// WSMaxPerSession and WSMax cap open event WebSockets; WSPing is their
	// keep-alive interval.
	WSMaxPerSession int      `yaml:"ws_max_per_session"`
	WSMax           int      `yaml:"ws_max"`
	WSPing          Duration `yaml:"ws_ping"`
}

// RTPConfig configures the media plane.
type RTPConfig struct {
	// Addr is the IP address the media sockets bind.
	Addr string `yaml:"addr"`
	// Port is the shared RTP port; RTCP uses Port+1. 0 picks a free pair.
	Port int `yaml:"port"`
	// Queue is the per-subscriber queue bound, in packets.
	Queue int `yaml:"queue"`
	// Batch sends with sendmmsg batches.
	Batch bool `yaml:"batch"`
	// Writers is the number of goroutines sending on each media socket;
	// 0 means one per CPU.
	Writers int `yaml:"writers"`
}

// WebRTCConfig configures browsers', WHIP and WHEP clients' media (package
// sfu).
type WebRTCConfig struct {
	// Enabled turns WebRTC (the signalling socket, WHIP and WHEP) on.
	Enabled bool `yaml:"enabled"`
	// Addr is the IP address the media is received on; empty: rtp.addr.
	Addr string `yaml:"addr"`
	// UDPPort puts every peer connection on one UDP port; 0 gives each
	// its own from PortMin..PortMax.
	UDPPort int `yaml:"udp_port"`
	PortMin int `yaml:"port_min"`
	PortMax int `yaml:"port_max"`
	// TCPPort also accepts ICE over TCP there (0: off).
	TCPPort int `yaml:"tcp_port"`
	// PublicIPs (comma-separated) replace Addr in candidates, for a node
	// behind 1:1 NAT.
	PublicIPs string `yaml:"public_ips"`
	// ICEServers (space- or comma-separated stun: and turn: URLs) are
	// handed to clients; TURN ones with TURNUsername and TURNCredential.
	ICEServers     string `yaml:"ice_servers"`
	TURNUsername   string `yaml:"turn_username"`
	TURNCredential string `yaml:"turn_credential"`
	// MaxPeers caps peer connections (a browser has two); MaxTracks the
	// tracks one peer publishes; MaxBitrate a subscriber's estimate.
	MaxPeers   int `yaml:"max_peers"`
	MaxTracks  int `yaml:"max_tracks"`
	MaxBitrate int `yaml:"max_bitrate"`
	// PlaceNear places browser members in a cluster (issue 16): one who
	// joins here is sent to the session's owner node when that node is up,
	// has room, takes the member's token and answers within this round
	// trip, so a session's members meet on one node and their packets
	// cross no bridge. Farther (another institution), full or unknown,
	// the member stays here. A session created here is handed the same
	// way to the near node with the most room when that has 1.5 times
	// this node's. 0 turns placement off.
	PlaceNear Duration `yaml:"place_near"`
	// DirectAudio sends subscribers' media the direct way: the node
	// encrypts it with the connection's SRTP keys and sends it on the
	// single UDP port itself, past pion's SRTP and ICE writers (audio
	// past pion's interceptors too); and takes publishers' media the same
	// way, decrypting it as the port reads it, past pion's receive chain
	// (ARCHITECTURE.md, "The direct path"). false keeps both on pion's
	// chains. The name is from when only audio went direct.
	DirectAudio bool `yaml:"direct_audio"`
}

// RelayConfig configures the RTP relay that carries the media of proxied
// SIP calls (package relay).
type RelayConfig struct {
	// Addr is the IP address the relay's sockets bind and rewritten SDP
	// advertises; it must be a specific address.
	Addr string `yaml:"addr"`
	// PortMin and PortMax bound the relay's UDP ports (two pairs per stream).
	PortMin int `yaml:"port_min"`
	PortMax int `yaml:"port_max"`
	// Timeout ends a call whose media stopped for this long.
	Timeout Duration `yaml:"timeout"`
	// NGAddr serves rtpengine's ng control protocol on this UDP host:port.
	// Empty turns it off.
	NGAddr string `yaml:"ng_addr"`
	// Kernel forwards established flows in the kernel when it can (package
	// kfwd); otherwise the relay forwards in user space.
	Kernel bool `yaml:"kernel"`

	// Issue 11 caps (package relay): the largest UDP payload relayed (user
	// space and kernel alike), how long after an offer or answer a party
	// behind NAT may be latched onto from another IP than its SDP's (also
	// a phone dialled into a session), and
	// the streams (m= lines) a call, an authenticated user and a signalling
	// source IP may hold.
	MaxPacket           int      `yaml:"max_packet"`
	LatchWindow         Duration `yaml:"latch_window"`
	MaxStreamsPerCall   int      `yaml:"max_streams_per_call"`
	MaxStreamsPerUser   int      `yaml:"max_streams_per_user"`
	MaxStreamsPerSource int      `yaml:"max_streams_per_source"`
}

// SIPConfig configures the SIP registrar and proxy (package sip).
type SIPConfig struct {
	// Listen is the host:port of the UDP and TCP listeners.
	Listen string `yaml:"listen"`
	// Advertise is the host put in Via and Record-Route; empty means the
	// listen host.
	Advertise string `yaml:"advertise"`
	// Domain is the SIP domain and digest realm; empty means the advertised
	// host. Accounts' password digests depend on it.
	Domain string `yaml:"domain"`
	// Expires is the registration lifetime granted when a client asks for none.
	Expires Duration `yaml:"expires"`
	// NATExpires caps the lifetime granted to clients behind NAT.
	NATExpires Duration `yaml:"nat_expires"`
	// ProbeInterval is how often registered contacts get an OPTIONS; those
	// that do not answer are dropped. 0 turns probing off.
	ProbeInterval Duration `yaml:"probe_interval"`
	// Algorithms lists the digest algorithms challenged, in order. MD5
	// comes first by default: SIPp 3.6 and baresip 1.0 answer only the first
	// challenge and fail on SHA-256 instead of trying the next.
	Algorithms string `yaml:"algorithms"`
	// AuthCalls challenges INVITEs with 407.
	AuthCalls bool `yaml:"auth_calls"`
	// RegisterRate and InviteRate are per-source-IP limits, requests per
	// second; 0 turns a limit off.
	RegisterRate int `yaml:"register_rate"`
	InviteRate   int `yaml:"invite_rate"`
	// RequestRate limits every other method per source IP, requests per
	// second; 0 turns it off.
	RequestRate int `yaml:"request_rate"`
	// MaxContacts caps the contacts one account may register.
	MaxContacts int `yaml:"max_contacts"`
	// TCPIdleTimeout closes a SIP TCP connection that sent nothing for this
	// long; TCPMaxConns and TCPMaxConnsPerIP cap accepted connections.
	TCPIdleTimeout   Duration `yaml:"tcp_idle_timeout"`
	TCPMaxConns      int      `yaml:"tcp_max_conns"`
	TCPMaxConnsPerIP int      `yaml:"tcp_max_conns_per_ip"`
	// MinPasswordLength is the shortest SIP password accepted for an account.
	MinPasswordLength int `yaml:"min_password_length"`
}

// SessionsConfig caps sessions and their members (package session).
type SessionsConfig struct {
	// Max caps the sessions not over (scheduled or live).
	Max int `yaml:"max"`
	// MaxMembers caps the members of one session.
	MaxMembers int `yaml:"max_members"`
}

// MixerConfig configures the audio mixers (package mixer).
type MixerConfig struct {
	// Speakers is how many of the loudest inputs a mix carries.
	Speakers int `yaml:"speakers"`
	// Depth is the jitter buffer's depth in 20 ms frames.
	Depth int `yaml:"depth"`
	// Max caps the mixers the node runs at once (one per session subgroup
	// with mixed endpoints); a new one beyond it is refused with 503.
	Max int `yaml:"max"`
	// Cores is the CPU the mixers may use, in cores, by their measured
	// load; a new mixer beyond it is refused with 503. 0 means 0.8 of the
	// node's CPUs (GOMAXPROCS).
	Cores float64 `yaml:"cores"`
}

// CapacityConfig sets the node's delivery capacity in packets/s out
// (package capacity): joins, links and mixers that would pass
// PPS × (1 − Headroom) are refused, and load past it sheds video.
type CapacityConfig struct {
	// PPS is the capacity in packets/s sent; 0 measures it (a self-probe
	// at start-up, then the running CPU cost per delivered packet).
	PPS float64 `yaml:"pps"`
	// Headroom is the fraction of the capacity kept free of admissions
	// for bursts and for members already admitted.
	Headroom float64 `yaml:"headroom"`
}

// RecordingConfig configures the recordings of sessions (packages
// recording, recorder).
type RecordingConfig struct {
	// Dir holds one directory per recording; empty means
	// <data_dir>/recordings.
	Dir string `yaml:"dir"`
	// CapacityMbps is what the disk takes for recordings, in Mb/s; a new
	// recording whose estimate would pass it is refused with 503. 0 means
	// measure it at start-up (32 MiB written into Dir).
	CapacityMbps float64 `yaml:"capacity_mbps"`
	// QuotaMB caps the megabytes of one owner's recordings; an owner at or
	// over it starts no new recording (507). 0 means no quota.
	QuotaMB int64 `yaml:"quota_mb"`
	// AdHocMax caps the ad-hoc recordings (endpoints with no session,
	// each a UDP port pair on rtp.addr) running at once.
	AdHocMax int `yaml:"adhoc_max"`
	// Playbacks and Exports cap the recordings played and exported at
	// once (each reads its files and paces or muxes them).
	Playbacks int `yaml:"playbacks"`
	Exports   int `yaml:"exports"`
}

// StreamingConfig configures the media services that run ffmpeg
// children (packages hls, thumbnail).
type StreamingConfig struct {
	// FFmpeg is the ffmpeg binary.
	FFmpeg string `yaml:"ffmpeg"`
	// HLSMax caps the sessions streamed as HLS at once (503 beyond).
	HLSMax int `yaml:"hls_max"`
	// HLSSegment is an HLS segment's duration (a keyframe starts each):
	// what a player without LL-HLS fetches, and how often it reloads the
	// playlist; LL-HLS players fetch parts of about 200 ms either way.
	HLSSegment Duration `yaml:"hls_segment"`
	// ThumbnailsMax caps the video tracks whose thumbnails are taken at
	// once (503 beyond).
	ThumbnailsMax int `yaml:"thumbnails_max"`
}

// CompositeConfig configures the video composites (package composite):
// an ffmpeg child each, run with streaming.ffmpeg.
type CompositeConfig struct {
	// Max caps the composites running at once (429 beyond).
	Max int `yaml:"max"`
	// Cores is the CPU the composites' children may use, in cores, by
	// their measured load; a new one beyond it is refused with 503. 0
	// means half the node's CPUs.
	Cores float64 `yaml:"cores"`
}

// VTranscodeConfig configures the video transcoders (package
// vtranscode): an ffmpeg child per source track and codec, size and rate
// class, for receivers that cannot take the source's codec; run with
// streaming.ffmpeg.
type VTranscodeConfig struct {
	// Max caps the transcoders running at once (503 beyond).
	Max int `yaml:"max"`
	// Cores is the CPU the transcoders' children may use, in cores, by
	// their measured load; a new one beyond it is refused with 503. 0
	// means half the node's CPUs.
	Cores float64 `yaml:"cores"`
	// MaxHeight and MaxFPS cap every transcoder's picture (16:9 classes
	// up to MaxHeight lines) and frame rate, whatever its receivers take.
	MaxHeight int `yaml:"max_height"`
	MaxFPS    int `yaml:"max_fps"`
}

// RecordingDir is where recordings go: Recording.Dir, else
// <data_dir>/recordings.
func (c Config) RecordingDir() string {
	if c.Recording.Dir != "" {
		return c.Recording.Dir
	}
	return filepath.Join(c.DataDir, "recordings")
}

// AuthConfig configures access to the API (package auth).
type AuthConfig struct {
	// APIKeys are the operator keys, comma-separated. Empty: the node makes
	// one at first start, keeps it in <data_dir>/api_key and prints it.
	APIKeys string `yaml:"api_keys"`
	// TokenSecret signs join and member tokens. Empty: the node makes one
	// and keeps it in <data_dir>/token_secret. Nodes that admit each
	// other's members must share it.
	TokenSecret string `yaml:"token_secret"`
}

// LinksConfig polices the media links members create with their own
// tokens (issue 11): where they may send, how many they may have, and the
// consent their remote must give. Links the operator creates are trusted.
type LinksConfig struct {
	// AllowDestinations are CIDRs, comma-separated, a member's link may
	// send to although they are loopback, link-local, multicast, broadcast
	// or this host's own, e.g. "127.0.0.0/8" for local tools. Empty: none.
	AllowDestinations string `yaml:"allow_destinations"`
	// MaxPerMember caps one member's links; MaxPerSession the links the
	// members of one session created.
	MaxPerMember  int `yaml:"max_per_member"`
	MaxPerSession int `yaml:"max_per_session"`
	// Consent is how long a member's link may hear nothing from its remote
	// before the node stops sending to it (RFC 7675 in spirit).
	Consent Duration `yaml:"consent"`
}

// AllowedDestinations parses AllowDestinations.
func (l LinksConfig) AllowedDestinations() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(l.AllowDestinations, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// NATSConfig configures the cluster bus.
type NATSConfig struct {
	// URL of an external NATS server (comma-separated list allowed).
	// Empty runs an embedded in-process server.
	URL string `yaml:"url"`
	// Listen makes the embedded server also accept outside clients on this
	// host:port. Empty means in-process only. Ignored when URL is set.
	Listen string `yaml:"listen"`
	// MediaBatch is how long a packet bridged to another node may wait
	// for others going there, so they cross as one message (package
	// bridge): each message costs both nodes and the NATS servers a
	// wake-up and a read, whatever it carries. 0 sends what has gathered
	// as soon as the sender runs. The default, 10 ms, is half an audio
	// frame: bridged packets arrive up to that much later, and in bursts
	// their receivers' jitter buffers absorb.
	MediaBatch Duration `yaml:"media_batch"`
}

// CatalogConfig configures the catalog database.
type CatalogConfig struct {
	// Driver is DriverSQLite or DriverPostgres.
	Driver string `yaml:"driver"`
	// DSN is the data source name. Empty with sqlite means
	// <data_dir>/convene.db (filled in by Resolved).
	DSN string `yaml:"dsn"`
}

// LogConfig configures logging.
type LogConfig struct {
	// Level is one of debug, info, warn, error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
	// StallTrace, when set, is a directory where the node writes a Go
	// execution trace of the seconds around a media stall (a send or a
	// read that waited past 100 ms in the node): what every goroutine and
	// thread did then. For diagnosis; the tracing costs a few per cent
	// of CPU while on.
	StallTrace string `yaml:"stall_trace"`
}

// Catalog drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// EnvPrefix prefixes every environment variable read by Load.
const EnvPrefix = "CONVENE_"

// EnvConfigFile names the environment variable that selects the config file
// when neither Load's path argument nor the -config flag does.
const EnvConfigFile = EnvPrefix + "CONFIG"

// sqliteFile is the catalog file name inside DataDir.
const sqliteFile = "convene.db"

// Default returns the built-in defaults. NodeID and Catalog.DSN are left
// empty: they are derived by Resolved.
func Default() Config {
	return Config{
		DataDir:    "./data",
		Sessions:   SessionsConfig{Max: 1000, MaxMembers: 1000},
		Mixer:      MixerConfig{Speakers: 6, Depth: 3, Max: 200},
		Capacity:   CapacityConfig{Headroom: 0.2},
		Recording:  RecordingConfig{AdHocMax: 16, Playbacks: 4, Exports: 2},
		Streaming:  StreamingConfig{FFmpeg: "ffmpeg", HLSMax: 4, HLSSegment: Duration(time.Second), ThumbnailsMax: 16},
		Composite:  CompositeConfig{Max: 4},
		VTranscode: VTranscodeConfig{Max: 8, MaxHeight: 720, MaxFPS: 30},
		HTTP: HTTPConfig{Addr: "127.0.0.1:8080", RequestTimeout: Duration(10 * time.Second), IdleTimeout: Duration(60 * time.Second),
			WSMaxPerSession: 256, WSMax: 4096, WSPing: Duration(30 * time.Second)},
		RTP: RTPConfig{
			Addr:  "127.0.0.1",
			Port:  40000,
			Queue: 512,
			Batch: false,
		},
		Relay: RelayConfig{Addr: "127.0.0.1", PortMin: 30000, PortMax: 39999, Timeout: Duration(60 * time.Second), Kernel: true,
			MaxPacket: 1500, LatchWindow: Duration(3 * time.Second), MaxStreamsPerCall: 4, MaxStreamsPerUser: 64, MaxStreamsPerSource: 256},
		WebRTC: WebRTCConfig{Enabled: true, UDPPort: 40002, PortMin: 50000, PortMax: 50999, MaxPeers: 1000, MaxTracks: 8,
			MaxBitrate: 6_000_000, PlaceNear: Duration(10 * time.Millisecond), DirectAudio: true},
		SIP: SIPConfig{Listen: "127.0.0.1:5060", Expires: Duration(time.Hour), NATExpires: Duration(60 * time.Second), ProbeInterval: Duration(30 * time.Second), Algorithms: "MD5,SHA-256", AuthCalls: true, RegisterRate: 100, InviteRate: 20,
			RequestRate: 100, MaxContacts: 10, TCPIdleTimeout: Duration(2 * time.Minute), TCPMaxConns: 4096, TCPMaxConnsPerIP: 32,
			MinPasswordLength: 12},
		Links:             LinksConfig{MaxPerMember: 8, MaxPerSession: 64, Consent: Duration(30 * time.Second)},
		NATS:              NATSConfig{MediaBatch: Duration(10 * time.Millisecond)},
		Catalog:           CatalogConfig{Driver: DriverSQLite},
		Log:               LogConfig{Level: "info", Format: "text"},
		HeartbeatInterval: Duration(2 * time.Second),
		ShutdownTimeout:   Duration(10 * time.Second),
	}
}

// Resolved returns a copy of c with derived defaults filled in: NodeID from
// the hostname (or "convene" if it is unavailable) when empty, and for the
// sqlite driver Catalog.DSN = filepath.Join(DataDir, "convene.db") when
// empty. Resolved is idempotent.
func (c Config) Resolved() Config {
	if c.NodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "convene"
		}
		c.NodeID = h
	}
	if c.Catalog.DSN == "" && c.Catalog.Driver == DriverSQLite {
		c.Catalog.DSN = filepath.Join(c.DataDir, sqliteFile)
	}
	return c
}

// Validate reports every invalid value in c, joined into one error. It
// accepts both resolved and unresolved configurations.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, val any, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: invalid value %s: %s",
			key, quote(val), fmt.Sprintf(format, args...)))
	}

	if strings.IndexFunc(c.NodeID, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 {
		bad("node_id", c.NodeID, "must not contain spaces or control characters")
	}
	if c.DataDir == "" {
		bad("data_dir", c.DataDir, "must not be empty")
	}
	if err := checkHostPort(c.HTTP.Addr); err != nil {
		bad("http.addr", c.HTTP.Addr, "%v", err)
	}
	if u := c.HTTP.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" ||
			p.User != nil || p.RawQuery != "" || p.Fragment != "" || strings.Trim(p.Path, "/") != "" {
			bad("http.public_url", u, "want a base URL such as https://node-a.example.org (http or https, a host, no path)")
		}
	}
	if c.HTTP.RequestTimeout.Std() < time.Second || c.HTTP.IdleTimeout.Std() < time.Second || c.HTTP.WSPing.Std() < time.Second {
		bad("http.request_timeout", c.HTTP.RequestTimeout, "http.request_timeout, idle_timeout and ws_ping want at least 1s")
	}
	if c.HTTP.WSMaxPerSession < 1 || c.HTTP.WSMax < 1 {
		bad("http.ws_max", c.HTTP.WSMax, "http.ws_max and ws_max_per_session want at least 1")
	}
	if net.ParseIP(c.RTP.Addr) == nil {
		bad("rtp.addr", c.RTP.Addr, "want an IP address such as 127.0.0.1, 0.0.0.0 or ::")
	}
	if c.RTP.Port < 0 || c.RTP.Port > 65534 {
		bad("rtp.port", c.RTP.Port, "want 0..65534 (RTCP uses port+1; 0 picks a free pair)")
	}
	if c.RTP.Queue < 1 {
		bad("rtp.queue", c.RTP.Queue, "must be at least 1")
	}
	if w := c.WebRTC; w.Enabled {
		if w.Addr != "" && net.ParseIP(w.Addr) == nil {
			bad("webrtc.addr", w.Addr, "want an IP address")
		}
		if w.UDPPort < 0 || w.UDPPort > 65535 {
			bad("webrtc.udp_port", w.UDPPort, "want 0..65535")
		}
		if w.TCPPort < 0 || w.TCPPort > 65535 {
			bad("webrtc.tcp_port", w.TCPPort, "want 0..65535")
		}
		if w.PortMin < 1 || w.PortMax < w.PortMin || w.PortMax > 65535 {
			bad("webrtc.port_min", fmt.Sprintf("%d..%d", w.PortMin, w.PortMax), "want 1 <= port_min <= port_max <= 65535")
		}
		for _, ip := range SplitList(w.PublicIPs) {
			if net.ParseIP(ip) == nil {
				bad("webrtc.public_ips", ip, "want IP addresses")
			}
		}
		for _, u := range SplitList(w.ICEServers) {
			if !strings.HasPrefix(u, "stun:") && !strings.HasPrefix(u, "turn:") && !strings.HasPrefix(u, "turns:") {
				bad("webrtc.ice_servers", u, "want stun:, turn: or turns: URLs")
			}
		}
		if w.MaxPeers < 1 {
			bad("webrtc.max_peers", w.MaxPeers, "must be at least 1")
		}
		if w.MaxTracks < 1 {
			bad("webrtc.max_tracks", w.MaxTracks, "must be at least 1")
		}
		if w.MaxBitrate < 100_000 {
			bad("webrtc.max_bitrate", w.MaxBitrate, "want at least 100000 bit/s")
		}
		if w.PlaceNear < 0 || w.PlaceNear.Std() > time.Second {
			bad("webrtc.place_near", w.PlaceNear, "want 0 (off) to 1s")
		}
	}
	if a := net.ParseIP(c.Relay.Addr); a == nil || a.IsUnspecified() {
		bad("relay.addr", c.Relay.Addr, "want a specific IP address such as 127.0.0.1 (it is advertised in SDP)")
	}
	if c.Relay.PortMin < 1 || c.Relay.PortMin > 65534 {
		bad("relay.port_min", c.Relay.PortMin, "want 1..65534")
	}
	if c.Relay.PortMax < c.Relay.PortMin+1 || c.Relay.PortMax > 65535 {
		bad("relay.port_max", c.Relay.PortMax, "want port_min+1..65535")
	}
	if c.Relay.Timeout <= 0 {
		bad("relay.timeout", c.Relay.Timeout, "must be positive")
	}
	if c.Relay.MaxPacket < 12 || c.Relay.MaxPacket > 2047 {
		bad("relay.max_packet", c.Relay.MaxPacket, "want 12..2047 bytes")
	}
	if c.Relay.LatchWindow <= 0 {
		bad("relay.latch_window", c.Relay.LatchWindow, "must be positive")
	}
	if c.Relay.MaxStreamsPerCall < 1 {
		bad("relay.max_streams_per_call", c.Relay.MaxStreamsPerCall, "must be at least 1")
	}
	if c.Relay.MaxStreamsPerUser < 1 {
		bad("relay.max_streams_per_user", c.Relay.MaxStreamsPerUser, "must be at least 1")
	}
	if c.Relay.MaxStreamsPerSource < 1 {
		bad("relay.max_streams_per_source", c.Relay.MaxStreamsPerSource, "must be at least 1")
	}
	if c.Relay.NGAddr != "" {
		if err := checkHostPort(c.Relay.NGAddr); err != nil {
			bad("relay.ng_addr", c.Relay.NGAddr, "%v", err)
		}
	}
	if err := checkHostPort(c.SIP.Listen); err != nil {
		bad("sip.listen", c.SIP.Listen, "%v", err)
	}
	if c.SIP.Expires < Duration(time.Minute) {
		bad("sip.expires", c.SIP.Expires, "want at least 1m")
	}
	if c.SIP.NATExpires < Duration(time.Minute) {
		bad("sip.nat_expires", c.SIP.NATExpires, "want at least 1m (the registrar's minimum)")
	}
	if c.SIP.ProbeInterval < 0 {
		bad("sip.probe_interval", c.SIP.ProbeInterval, "must not be negative")
	}
	for a := range strings.SplitSeq(c.SIP.Algorithms, ",") {
		if a = strings.TrimSpace(a); a != "SHA-256" && a != "MD5" {
			bad("sip.algorithms", c.SIP.Algorithms, "want a comma-separated list of SHA-256 and MD5")
			break
		}
	}
	if c.SIP.RegisterRate < 0 {
		bad("sip.register_rate", c.SIP.RegisterRate, "must not be negative")
	}
	if c.SIP.InviteRate < 0 {
		bad("sip.invite_rate", c.SIP.InviteRate, "must not be negative")
	}
	if c.Mixer.Speakers < 1 || c.Mixer.Speakers > 32 {
		bad("mixer.speakers", c.Mixer.Speakers, "want 1 to 32")
	}
	if c.Mixer.Depth < 1 || c.Mixer.Depth > 25 {
		bad("mixer.depth", c.Mixer.Depth, "want 1 to 25 frames of 20 ms")
	}
	if c.Mixer.Max < 1 {
		bad("mixer.max", c.Mixer.Max, "want at least 1")
	}
	if c.Mixer.Cores < 0 || c.Mixer.Cores > 1024 {
		bad("mixer.cores", c.Mixer.Cores, "want 0 (0.8 of the node's CPUs) to 1024")
	}
	if c.Capacity.PPS < 0 {
		bad("capacity.pps", c.Capacity.PPS, "want 0 (measure) or more")
	}
	if c.Capacity.Headroom < 0 || c.Capacity.Headroom >= 1 {
		bad("capacity.headroom", c.Capacity.Headroom, "want 0 to below 1")
	}
	if c.Recording.CapacityMbps < 0 {
		bad("recording.capacity_mbps", c.Recording.CapacityMbps, "want 0 (measure the disk) or more")
	}
	if c.Recording.QuotaMB < 0 {
		bad("recording.quota_mb", c.Recording.QuotaMB, "want 0 (no quota) or more")
	}
	if c.Recording.AdHocMax < 0 || c.Recording.AdHocMax > 1000 {
		bad("recording.adhoc_max", c.Recording.AdHocMax, "want 0 (none) to 1000")
	}
	if c.Recording.Playbacks < 1 || c.Recording.Playbacks > 1000 {
		bad("recording.playbacks", c.Recording.Playbacks, "want 1 to 1000")
	}
	if c.Recording.Exports < 1 || c.Recording.Exports > 100 {
		bad("recording.exports", c.Recording.Exports, "want 1 to 100")
	}
	if c.Streaming.HLSMax < 1 || c.Streaming.HLSMax > 1000 {
		bad("streaming.hls_max", c.Streaming.HLSMax, "want 1 to 1000")
	}
	if d := c.Streaming.HLSSegment.Std(); d < 500*time.Millisecond || d > 10*time.Second {
		bad("streaming.hls_segment", c.Streaming.HLSSegment, "want 500ms to 10s")
	}
	if c.Streaming.ThumbnailsMax < 1 || c.Streaming.ThumbnailsMax > 1000 {
		bad("streaming.thumbnails_max", c.Streaming.ThumbnailsMax, "want 1 to 1000")
	}
	if c.Composite.Max < 1 || c.Composite.Max > 1000 {
		bad("composite.max", c.Composite.Max, "want 1 to 1000")
	}
	if c.Composite.Cores < 0 {
		bad("composite.cores", c.Composite.Cores, "want 0 (half the CPUs) or more")
	}
	if c.VTranscode.Max < 0 || c.VTranscode.Max > 1000 {
		bad("vtranscode.max", c.VTranscode.Max, "want 0 (none) to 1000")
	}
	if c.VTranscode.Cores < 0 {
		bad("vtranscode.cores", c.VTranscode.Cores, "want 0 (half the CPUs) or more")
	}
	if c.VTranscode.MaxHeight < 90 || c.VTranscode.MaxHeight > 1080 {
		bad("vtranscode.max_height", c.VTranscode.MaxHeight, "want 90 to 1080")
	}
	if c.VTranscode.MaxFPS < 5 || c.VTranscode.MaxFPS > 60 {
		bad("vtranscode.max_fps", c.VTranscode.MaxFPS, "want 5 to 60")
	}
	if c.Sessions.Max < 1 || c.Sessions.MaxMembers < 1 {
		bad("sessions.max", c.Sessions.Max, "sessions.max and sessions.max_members want at least 1")
	}
	if c.SIP.RequestRate < 0 {
		bad("sip.request_rate", c.SIP.RequestRate, "must not be negative")
	}
	if c.SIP.MaxContacts < 1 {
		bad("sip.max_contacts", c.SIP.MaxContacts, "want at least 1")
	}
	if c.SIP.TCPIdleTimeout.Std() < time.Second {
		bad("sip.tcp_idle_timeout", c.SIP.TCPIdleTimeout, "want at least 1s")
	}
	if c.SIP.TCPMaxConns < 1 || c.SIP.TCPMaxConnsPerIP < 1 {
		bad("sip.tcp_max_conns", c.SIP.TCPMaxConns, "tcp_max_conns and tcp_max_conns_per_ip want at least 1")
	}
	if c.SIP.MinPasswordLength < 1 {
		bad("sip.min_password_length", c.SIP.MinPasswordLength, "want at least 1")
	}
	if c.NATS.URL != "" {
		if err := checkNATSURL(c.NATS.URL); err != nil {
			bad("nats.url", c.NATS.URL, "%v", err)
		}
	}
	if c.NATS.MediaBatch < 0 || c.NATS.MediaBatch.Std() > 100*time.Millisecond {
		bad("nats.media_batch", c.NATS.MediaBatch, "want 0 to 100ms")
	}
	if c.NATS.Listen != "" {
		if err := checkHostPort(c.NATS.Listen); err != nil {
			bad("nats.listen", c.NATS.Listen, "%v", err)
		}
	}
	switch c.Catalog.Driver {
	case DriverSQLite:
	case DriverPostgres:
		if c.Catalog.DSN == "" {
			bad("catalog.dsn", c.Catalog.DSN, "required with the postgres driver")
		} else if err := checkPostgresDSN(c.Catalog.DSN); err != nil {
			bad("catalog.dsn", "(not shown: it may hold a password)", "%v", err)
		}
	default:
		bad("catalog.driver", c.Catalog.Driver, "want %s or %s", DriverSQLite, DriverPostgres)
	}
	if _, err := c.Links.AllowedDestinations(); err != nil {
		bad("links.allow_destinations", c.Links.AllowDestinations, "want comma-separated CIDRs such as 127.0.0.0/8: %v", err)
	}
	if c.Links.MaxPerMember < 1 {
		bad("links.max_per_member", c.Links.MaxPerMember, "must be at least 1")
	}
	if c.Links.MaxPerSession < 1 {
		bad("links.max_per_session", c.Links.MaxPerSession, "must be at least 1")
	}
	if c.Links.Consent.Std() < time.Second {
		bad("links.consent", c.Links.Consent, "must be at least 1s")
	}
	if c.Auth.TokenSecret != "" && len(c.Auth.TokenSecret) < 16 {
		bad("auth.token_secret", "(hidden)", "must be at least 16 characters")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", c.Log.Level, "want debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", c.Log.Format, "want text or json")
	}
	if c.HeartbeatInterval <= 0 {
		bad("heartbeat_interval", c.HeartbeatInterval, "must be positive")
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", c.ShutdownTimeout, "must be positive")
	}
	return errors.Join(errs...)
}

func quote(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case fmt.Stringer:
		return strconv.Quote(v.String())
	default:
		return fmt.Sprint(v)
	}
}

// checkHostPort accepts host:port with a numeric port in 0..65535; the host
// may be empty (all interfaces).
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("want host:port with a port in 0..65535")
	}
	return nil
}

// checkPostgresDSN accepts what the catalog's driver (pgx) does: a
// postgres:// or postgresql:// URL or a key=value string. Its error never
// repeats the DSN; pgx's own redacts passwords only as far as it can parse.
func checkPostgresDSN(dsn string) error {
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return errors.New("want a postgres://user:password@host:port/database URL or a key=value string that PostgreSQL's libpq would take")
	}
	return nil
}

// checkNATSURL accepts what nats.Connect does: a comma-separated list of
// URLs, each with an optional scheme (nats:// is implied).
func checkNATSURL(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if !strings.Contains(part, "://") {
			part = "nats://" + part
		}
		u, err := url.Parse(part)
		if err != nil || u.Host == "" {
			return errors.New("want a NATS URL such as nats://host:4222")
		}
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("2s",
// "500ms") in YAML, environment variables and flags.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.String.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler using time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want %s)", b, wantDuration)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want %s", n.Line, wantDuration)
	}
	return d.UnmarshalText([]byte(n.Value))
}

const wantDuration = `a Go duration such as "2s" or "500ms"`

// SplitList splits a comma- or space-separated list, dropping empty items.
func SplitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}
