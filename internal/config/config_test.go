package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const samplePath = "../../config/convene.sample.yaml"

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "convene.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantErr(t *testing.T, err error, substrs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one containing %q", substrs)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestSampleEqualsDefault(t *testing.T) {
	cfg, args, err := Load(samplePath, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 0 {
		t.Errorf("args = %q", args)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Resolved().Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("sample and Default() drifted:\nsample:  %+v\ndefault: %+v", cfg, Default())
	}
}

// Every key must appear in the sample, documented with its env var and flag.
func TestSampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := prefix + n.Content[i].Value
			if n.Content[i+1].Kind == yaml.MappingNode {
				walk(n.Content[i+1], p+".")
			} else {
				present[p] = true
			}
		}
	}
	walk(doc.Content[0], "")
	for _, k := range keys() {
		if !present[k.path] {
			t.Errorf("sample lacks key %s", k.path)
		}
		if !bytes.Contains(data, []byte(k.env)) {
			t.Errorf("sample does not mention %s", k.env)
		}
		if !bytes.Contains(data, []byte("-"+k.flag)) {
			t.Errorf("sample does not mention -%s", k.flag)
		}
	}
}

func TestDerivedNames(t *testing.T) {
	wantEnv := []string{
		"CONVENE_NODE_ID", "CONVENE_DATA_DIR", "CONVENE_HTTP_ADDR", "CONVENE_HTTP_PUBLIC_URL", "CONVENE_HTTP_PPROF", "CONVENE_HTTP_METRICS_TOKEN", "CONVENE_HTTP_REQUEST_TIMEOUT",
		"CONVENE_HTTP_IDLE_TIMEOUT", "CONVENE_HTTP_WS_MAX_PER_SESSION", "CONVENE_HTTP_WS_MAX", "CONVENE_HTTP_WS_PING",
		"CONVENE_RTP_ADDR", "CONVENE_RTP_PORT", "CONVENE_RTP_QUEUE", "CONVENE_RTP_BATCH", "CONVENE_RTP_WRITERS",
		"CONVENE_RELAY_ADDR", "CONVENE_RELAY_PORT_MIN", "CONVENE_RELAY_PORT_MAX", "CONVENE_RELAY_TIMEOUT", "CONVENE_RELAY_NG_ADDR",
		"CONVENE_RELAY_KERNEL", "CONVENE_RELAY_MAX_PACKET", "CONVENE_RELAY_LATCH_WINDOW", "CONVENE_RELAY_MAX_STREAMS_PER_CALL",
		"CONVENE_RELAY_MAX_STREAMS_PER_USER", "CONVENE_RELAY_MAX_STREAMS_PER_SOURCE",
		"CONVENE_WEBRTC_ENABLED", "CONVENE_WEBRTC_ADDR", "CONVENE_WEBRTC_UDP_PORT", "CONVENE_WEBRTC_PORT_MIN", "CONVENE_WEBRTC_PORT_MAX",
		"CONVENE_WEBRTC_TCP_PORT", "CONVENE_WEBRTC_PUBLIC_IPS", "CONVENE_WEBRTC_ICE_SERVERS", "CONVENE_WEBRTC_TURN_USERNAME",
		"CONVENE_WEBRTC_TURN_CREDENTIAL", "CONVENE_WEBRTC_MAX_PEERS", "CONVENE_WEBRTC_MAX_TRACKS", "CONVENE_WEBRTC_MAX_BITRATE", "CONVENE_WEBRTC_PLACE_NEAR", "CONVENE_WEBRTC_DIRECT_AUDIO",
		"CONVENE_SIP_LISTEN", "CONVENE_SIP_ADVERTISE", "CONVENE_SIP_DOMAIN", "CONVENE_SIP_EXPIRES", "CONVENE_SIP_NAT_EXPIRES",
		"CONVENE_SIP_PROBE_INTERVAL", "CONVENE_SIP_ALGORITHMS", "CONVENE_SIP_AUTH_CALLS", "CONVENE_SIP_REGISTER_RATE",
		"CONVENE_SIP_INVITE_RATE", "CONVENE_SIP_REQUEST_RATE", "CONVENE_SIP_MAX_CONTACTS",
		"CONVENE_SIP_TCP_IDLE_TIMEOUT", "CONVENE_SIP_TCP_MAX_CONNS", "CONVENE_SIP_TCP_MAX_CONNS_PER_IP", "CONVENE_SIP_MIN_PASSWORD_LENGTH",
		"CONVENE_NATS_URL", "CONVENE_NATS_LISTEN", "CONVENE_NATS_MEDIA_BATCH",
		"CONVENE_CATALOG_DRIVER", "CONVENE_CATALOG_DSN",
		"CONVENE_AUTH_API_KEYS", "CONVENE_AUTH_TOKEN_SECRET", "CONVENE_SESSIONS_MAX", "CONVENE_SESSIONS_MAX_MEMBERS",
		"CONVENE_LINKS_ALLOW_DESTINATIONS", "CONVENE_LINKS_MAX_PER_MEMBER", "CONVENE_LINKS_MAX_PER_SESSION", "CONVENE_LINKS_CONSENT",
		"CONVENE_MIXER_SPEAKERS", "CONVENE_MIXER_DEPTH", "CONVENE_MIXER_MAX", "CONVENE_MIXER_CORES",
		"CONVENE_CAPACITY_PPS", "CONVENE_CAPACITY_HEADROOM",
		"CONVENE_RECORDING_DIR", "CONVENE_RECORDING_CAPACITY_MBPS", "CONVENE_RECORDING_QUOTA_MB",
		"CONVENE_RECORDING_ADHOC_MAX", "CONVENE_RECORDING_PLAYBACKS", "CONVENE_RECORDING_EXPORTS", "CONVENE_STREAMING_FFMPEG", "CONVENE_STREAMING_HLS_MAX", "CONVENE_STREAMING_HLS_SEGMENT", "CONVENE_STREAMING_THUMBNAILS_MAX",
		"CONVENE_COMPOSITE_MAX", "CONVENE_COMPOSITE_CORES",
		"CONVENE_VTRANSCODE_MAX", "CONVENE_VTRANSCODE_CORES", "CONVENE_VTRANSCODE_MAX_HEIGHT", "CONVENE_VTRANSCODE_MAX_FPS",
		"CONVENE_LOG_LEVEL", "CONVENE_LOG_FORMAT", "CONVENE_LOG_STALL_TRACE",
		"CONVENE_HEARTBEAT_INTERVAL", "CONVENE_SHUTDOWN_TIMEOUT",
	}
	wantFlags := []string{
		"node-id", "data-dir", "http-addr", "http-public-url", "http-pprof", "http-metrics-token", "http-request-timeout", "http-idle-timeout",
		"http-ws-max-per-session", "http-ws-max", "http-ws-ping", "rtp-addr", "rtp-port", "rtp-queue", "rtp-batch", "rtp-writers",
		"relay-addr", "relay-port-min", "relay-port-max", "relay-timeout", "relay-ng-addr", "relay-kernel",
		"relay-max-packet", "relay-latch-window", "relay-max-streams-per-call", "relay-max-streams-per-user", "relay-max-streams-per-source",
		"webrtc-enabled", "webrtc-addr", "webrtc-udp-port", "webrtc-port-min", "webrtc-port-max", "webrtc-tcp-port", "webrtc-public-ips",
		"webrtc-ice-servers", "webrtc-turn-username", "webrtc-turn-credential", "webrtc-max-peers", "webrtc-max-tracks", "webrtc-max-bitrate", "webrtc-place-near", "webrtc-direct-audio",
		"sip-listen", "sip-advertise", "sip-domain", "sip-expires", "sip-nat-expires", "sip-probe-interval",
		"sip-algorithms", "sip-auth-calls", "sip-register-rate", "sip-invite-rate", "sip-request-rate", "sip-max-contacts",
		"sip-tcp-idle-timeout", "sip-tcp-max-conns", "sip-tcp-max-conns-per-ip", "sip-min-password-length",
		"nats-url", "nats-listen", "nats-media-batch", "catalog-driver", "catalog-dsn", "auth-api-keys", "auth-token-secret", "sessions-max", "sessions-max-members",
		"links-allow-destinations", "links-max-per-member", "links-max-per-session", "links-consent", "mixer-speakers", "mixer-depth", "mixer-max", "mixer-cores", "capacity-pps", "capacity-headroom", "recording-dir", "recording-capacity-mbps", "recording-quota-mb", "recording-adhoc-max", "recording-playbacks", "recording-exports", "streaming-ffmpeg", "streaming-hls-max", "streaming-hls-segment", "streaming-thumbnails-max", "composite-max", "composite-cores", "vtranscode-max", "vtranscode-cores", "vtranscode-max-height", "vtranscode-max-fps", "log-level", "log-format", "log-stall-trace",
		"heartbeat-interval", "shutdown-timeout",
	}
	var gotEnv, gotFlags []string
	for _, k := range keys() {
		gotEnv = append(gotEnv, k.env)
		gotFlags = append(gotFlags, k.flag)
		if flagUsage[k.path] == "" {
			t.Errorf("key %s has no flag usage in flagUsage", k.path)
		}
	}
	if !slices.Equal(gotEnv, wantEnv) {
		t.Errorf("env names:\n got %q\nwant %q", gotEnv, wantEnv)
	}
	if !slices.Equal(gotFlags, wantFlags) {
		t.Errorf("flag names:\n got %q\nwant %q", gotFlags, wantFlags)
	}
	if len(flagUsage) != len(keys()) {
		t.Errorf("flagUsage has %d entries for %d keys", len(flagUsage), len(keys()))
	}
}

func TestPrintFlags(t *testing.T) {
	var buf bytes.Buffer
	PrintFlags(&buf)
	out := buf.String()
	for _, s := range []string{
		"-config file", "CONVENE_CONFIG",
		"-rtp-port port", "(default 40000)", "CONVENE_RTP_PORT",
		"-http-addr host:port", `(default 127.0.0.1:8080)`,
		"-heartbeat-interval duration", "(default 2s)",
		"-rtp-batch", "-rtp-queue", "(default 512)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("PrintFlags output lacks %q:\n%s", s, out)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help"} {
		_, _, err := Load("", nil, []string{arg})
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("Load(%s) error = %v, want flag.ErrHelp", arg, err)
		}
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
node_id: from-file
http:
  addr: 127.0.0.1:1111
rtp:
  port: 1000
  queue: 7
log:
  level: debug
heartbeat_interval: 3s
`)
	env := []string{
		"PATH=/bin",
		"CONVENE_HTTP_ADDR=127.0.0.1:2222",
		"CONVENE_RTP_PORT=2000",
		"CONVENE_RTP_PORT=2002", // last wins
		"CONVENE_LOG_LEVEL=warn",
		"CONVENE_RTP_BATCH=false",
		"CONVENE_SHUTDOWN_TIMEOUT=1m",
	}
	args := []string{"-rtp-port", "3000", "-log-level=error", "-heartbeat-interval", "250ms", "pos1", "-pos2"}
	cfg, rest, err := Load(file, env, args)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.NodeID = "from-file"                                 // file
	want.RTP.Queue = 7                                        // file
	want.HTTP.Addr = "127.0.0.1:2222"                         // env over file
	want.RTP.Batch = false                                    // env over default
	want.ShutdownTimeout = Duration(time.Minute)              // env over default
	want.RTP.Port = 3000                                      // flag over env over file
	want.Log.Level = "error"                                  // flag over env over file
	want.HeartbeatInterval = Duration(250 * time.Millisecond) // flag over file
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
	if !slices.Equal(rest, []string{"pos1", "-pos2"}) {
		t.Errorf("rest = %q", rest)
	}

	// Env alone overrides file; a flag set to the default still wins.
	cfg, _, err = Load(file, env, []string{"-http-addr", "127.0.0.1:8080", "-rtp-batch"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RTP.Port != 2002 || cfg.Log.Level != "warn" {
		t.Errorf("env did not override file: port %d level %s", cfg.RTP.Port, cfg.Log.Level)
	}
	if cfg.HTTP.Addr != "127.0.0.1:8080" || !cfg.RTP.Batch {
		t.Errorf("flags did not override env: addr %s batch %v", cfg.HTTP.Addr, cfg.RTP.Batch)
	}

	// Empty env value sets an empty string.
	cfg, _, err = Load(file, []string{"CONVENE_NODE_ID="}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != "" {
		t.Errorf("NodeID = %q, want empty", cfg.NodeID)
	}
}

func TestConfigFileSelection(t *testing.T) {
	a := writeFile(t, "node_id: a\n")
	b := writeFile(t, "node_id: b\n")
	c := writeFile(t, "node_id: c\n")
	for _, tc := range []struct {
		name string
		path string
		env  []string
		args []string
		want string
	}{
		{"none", "", nil, nil, ""},
		{"env", "", []string{"CONVENE_CONFIG=" + a}, nil, "a"},
		{"path beats env", b, []string{"CONVENE_CONFIG=" + a}, nil, "b"},
		{"flag beats path", b, []string{"CONVENE_CONFIG=" + a}, []string{"-config", c}, "c"},
		{"flag alone", "", nil, []string{"-config=" + c}, "c"},
		{"empty flag disables", b, nil, []string{"-config="}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := Load(tc.path, tc.env, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NodeID != tc.want {
				t.Errorf("NodeID = %q, want %q", cfg.NodeID, tc.want)
			}
		})
	}
	_, _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, nil)
	wantErr(t, err, "missing.yaml")
}

func TestFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    []string
	}{
		{"unknown top key", "node_id: x\nbogus: 1\n", []string{":2:", "unknown key bogus"}},
		{"unknown nested key", "rtp:\n  port: 1\n  prot: 2\n", []string{":3:", "unknown key rtp.prot"}},
		{"bad duration", "heartbeat_interval: 2 seconds\n", []string{":1:", "heartbeat_interval", `"2 seconds"`, "duration"}},
		{"bare number duration", "shutdown_timeout: 10\n", []string{"shutdown_timeout", `"10"`}},
		{"bad port", "rtp:\n  port: abc\n", []string{":2:", "rtp.port", `"abc"`, "integer"}},
		{"port out of range", "rtp:\n  port: 65535\n", []string{"rtp.port", "65535", "0..65534"}},
		{"bad bool", "rtp:\n  batch: maybe\n", []string{"rtp.batch", `"maybe"`}},
		{"null leaf", "data_dir:\n", []string{":1:", "data_dir", "missing value"}},
		{"section not mapping", "rtp: 5\n", []string{"rtp", "want a mapping"}},
		{"leaf not scalar", "log:\n  level: [a]\n", []string{"log.level", "sequence"}},
		{"duplicate", "node_id: a\nnode_id: b\n", []string{":2:", "duplicate key node_id", "line 1"}},
		{"two documents", "node_id: a\n---\nnode_id: b\n", []string{"more than one"}},
		{"syntax", "rtp: [\n", []string{"convene.yaml"}},
		{"top not mapping", "- a\n", []string{"top level", "want a mapping"}},
		{"bad level", "log:\n  level: verbose\n", []string{"log.level", `"verbose"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.content)
			_, _, err := Load(p, nil, nil)
			wantErr(t, err, append([]string{"config:"}, tc.want...)...)
			if !strings.Contains(tc.name, "range") && !strings.Contains(tc.name, "bad level") {
				wantErr(t, err, p)
			}
		})
	}
}

func TestEmptyFileAndSections(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "---\n", "rtp:\nlog:\n"} {
		cfg, _, err := Load(writeFile(t, content), nil, nil)
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("%q: got %+v", content, cfg)
		}
	}
}

func TestEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"CONVENE_BOGUS=1", []string{"unknown environment variable CONVENE_BOGUS"}},
		{"CONVENE_RTP=1", []string{"unknown environment variable CONVENE_RTP"}},
		{"CONVENE_RTP_PORT=abc", []string{"CONVENE_RTP_PORT", `"abc"`, "integer"}},
		{"CONVENE_RTP_PORT=99999", []string{"rtp.port", "99999"}},
		{"CONVENE_HEARTBEAT_INTERVAL=2", []string{"CONVENE_HEARTBEAT_INTERVAL", `"2"`, "duration"}},
		{"CONVENE_HEARTBEAT_INTERVAL=-1s", []string{"heartbeat_interval", "must be positive"}},
		{"CONVENE_RTP_BATCH=yes", []string{"CONVENE_RTP_BATCH", `"yes"`}},
	} {
		_, _, err := Load("", []string{"HOME=/x", tc.env}, nil)
		wantErr(t, err, tc.want...)
	}
	// Not ours: ignored.
	if _, _, err := Load("", []string{"CONVENEX=1", "convene_foo=1", "NOEQUALS"}, nil); err != nil {
		t.Error(err)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-rtp-port", "abc"}, []string{`invalid value "abc" for flag -rtp-port: want an integer`}},
		{[]string{"-rtp-port", "-1"}, []string{"rtp.port", "-1"}},
		{[]string{"-shutdown-timeout", "soon"}, []string{"-shutdown-timeout", `"soon"`, "duration"}},
		{[]string{"-shutdown-timeout", "0s"}, []string{"shutdown_timeout", "must be positive"}},
		{[]string{"-nope"}, []string{"-nope"}},
		{[]string{"-http-addr", "localhost"}, []string{"http.addr", `"localhost"`, "host:port"}},
	} {
		_, _, err := Load("", nil, tc.args)
		wantErr(t, err, tc.want...)
	}
}

func TestValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"port 0", func(c *Config) { c.RTP.Port = 0 }, ""},
		{"port max", func(c *Config) { c.RTP.Port = 65534 }, ""},
		{"port over", func(c *Config) { c.RTP.Port = 65535 }, "rtp.port"},
		{"port negative", func(c *Config) { c.RTP.Port = -1 }, "rtp.port"},
		{"queue 0", func(c *Config) { c.RTP.Queue = 0 }, "rtp.queue"},
		{"queue 1", func(c *Config) { c.RTP.Queue = 1 }, ""},
		{"media batch 0", func(c *Config) { c.NATS.MediaBatch = 0 }, ""},
		{"media batch negative", func(c *Config) { c.NATS.MediaBatch = -1 }, "nats.media_batch"},
		{"media batch over", func(c *Config) { c.NATS.MediaBatch = Duration(time.Second) }, "nats.media_batch"},
		{"rtp addr v6", func(c *Config) { c.RTP.Addr = "::" }, ""},
		{"rtp addr host", func(c *Config) { c.RTP.Addr = "localhost" }, "rtp.addr"},
		{"rtp addr hostport", func(c *Config) { c.RTP.Addr = "127.0.0.1:5" }, "rtp.addr"},
		{"http all ifaces", func(c *Config) { c.HTTP.Addr = ":0" }, ""},
		{"http v6", func(c *Config) { c.HTTP.Addr = "[::1]:80" }, ""},
		{"http no port", func(c *Config) { c.HTTP.Addr = "127.0.0.1" }, "http.addr"},
		{"http bad port", func(c *Config) { c.HTTP.Addr = "127.0.0.1:http" }, "http.addr"},
		{"http big port", func(c *Config) { c.HTTP.Addr = "127.0.0.1:65536" }, "http.addr"},
		{"public url", func(c *Config) { c.HTTP.PublicURL = "https://node-a.example.org" }, ""},
		{"public url slash", func(c *Config) { c.HTTP.PublicURL = "http://[::1]:8080/" }, ""},
		{"public url path", func(c *Config) { c.HTTP.PublicURL = "https://example.org/convene" }, "http.public_url"},
		{"public url scheme", func(c *Config) { c.HTTP.PublicURL = "ftp://example.org" }, "http.public_url"},
		{"public url no host", func(c *Config) { c.HTTP.PublicURL = "node-a:8080" }, "http.public_url"},
		{"public url user", func(c *Config) { c.HTTP.PublicURL = "https://u:p@example.org" }, "http.public_url"},
		{"nats url", func(c *Config) { c.NATS.URL = "nats://a:4222, b:4222" }, ""},
		{"nats bad url", func(c *Config) { c.NATS.URL = "nats://" }, "nats.url"},
		{"nats listen", func(c *Config) { c.NATS.Listen = "127.0.0.1:4222" }, ""},
		{"nats bad listen", func(c *Config) { c.NATS.Listen = "4222" }, "nats.listen"},
		{"postgres", func(c *Config) { c.Catalog.Driver = "postgres"; c.Catalog.DSN = "postgres://x/y" }, ""},
		{"postgres no dsn", func(c *Config) { c.Catalog.Driver = "postgres" }, "catalog.dsn"},
		{"postgres key=value", func(c *Config) {
			c.Catalog.Driver, c.Catalog.DSN = "postgres", "host=db.example dbname=convene user=convene password=pw sslmode=verify-full"
		}, ""},
		{"postgres bad port", func(c *Config) {
			c.Catalog.Driver, c.Catalog.DSN = "postgres", "postgres://convene:pw@db.example:http/convene"
		}, "catalog.dsn"},
		{"postgres bad sslmode", func(c *Config) {
			c.Catalog.Driver, c.Catalog.DSN = "postgres", "postgres://convene:pw@db.example/convene?sslmode=maybe"
		}, "catalog.dsn"},
		{"bad driver", func(c *Config) { c.Catalog.Driver = "mysql" }, "catalog.driver"},
		{"level", func(c *Config) { c.Log.Level = "debug" }, ""},
		{"bad level", func(c *Config) { c.Log.Level = "INFO" }, "log.level"},
		{"json", func(c *Config) { c.Log.Format = "json" }, ""},
		{"bad format", func(c *Config) { c.Log.Format = "xml" }, "log.format"},
		{"zero heartbeat", func(c *Config) { c.HeartbeatInterval = 0 }, "heartbeat_interval"},
		{"negative shutdown", func(c *Config) { c.ShutdownTimeout = -1 }, "shutdown_timeout"},
		{"empty data dir", func(c *Config) { c.DataDir = "" }, "data_dir"},
		{"relay addr any", func(c *Config) { c.Relay.Addr = "0.0.0.0" }, "relay.addr"},
		{"relay ports reversed", func(c *Config) { c.Relay.PortMin, c.Relay.PortMax = 40000, 30000 }, "relay.port_max"},
		{"relay timeout 0", func(c *Config) { c.Relay.Timeout = 0 }, "relay.timeout"},
		{"relay ng", func(c *Config) { c.Relay.NGAddr = "127.0.0.1:2223" }, ""},
		{"relay bad ng", func(c *Config) { c.Relay.NGAddr = "2223" }, "relay.ng_addr"},
		{"relay max packet", func(c *Config) { c.Relay.MaxPacket = 4096 }, "relay.max_packet"},
		{"relay latch window", func(c *Config) { c.Relay.LatchWindow = 0 }, "relay.latch_window"},
		{"relay streams per call", func(c *Config) { c.Relay.MaxStreamsPerCall = 0 }, "relay.max_streams_per_call"},
		{"relay streams per user", func(c *Config) { c.Relay.MaxStreamsPerUser = 0 }, "relay.max_streams_per_user"},
		{"relay streams per source", func(c *Config) { c.Relay.MaxStreamsPerSource = 0 }, "relay.max_streams_per_source"},
		{"sip bad listen", func(c *Config) { c.SIP.Listen = "5060" }, "sip.listen"},
		{"sip short nat expires", func(c *Config) { c.SIP.NATExpires = Duration(time.Second) }, "sip.nat_expires"},
		{"sip bad algorithm", func(c *Config) { c.SIP.Algorithms = "SHA-256,SHA-1" }, "sip.algorithms"},
		{"sip negative rate", func(c *Config) { c.SIP.InviteRate = -1 }, "sip.invite_rate"},
		{"node id space", func(c *Config) { c.NodeID = "a b" }, "node_id"},
		{"node id dotted", func(c *Config) { c.NodeID = "host.example.com" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tc.want)
		})
	}
	// All problems are reported at once.
	c := Default()
	c.RTP.Queue, c.Log.Format = 0, "xml"
	wantErr(t, c.Validate(), "rtp.queue", "log.format")
}

func TestResolved(t *testing.T) {
	c := Default()
	c.DataDir = "/var/lib/convene"
	r := c.Resolved()
	if r.NodeID == "" {
		t.Error("NodeID not filled")
	}
	if h, err := os.Hostname(); err == nil && h != "" && r.NodeID != h {
		t.Errorf("NodeID = %q, want hostname %q", r.NodeID, h)
	}
	if want := filepath.Join("/var/lib/convene", "convene.db"); r.Catalog.DSN != want {
		t.Errorf("DSN = %q, want %q", r.Catalog.DSN, want)
	}
	if !reflect.DeepEqual(r.Resolved(), r) {
		t.Error("Resolved is not idempotent")
	}
	if c.NodeID != "" || c.Catalog.DSN != "" {
		t.Error("Resolved modified its receiver")
	}

	c.NodeID, c.Catalog.DSN = "n1", "/tmp/x.db"
	if r := c.Resolved(); r.NodeID != "n1" || r.Catalog.DSN != "/tmp/x.db" {
		t.Errorf("explicit values overwritten: %+v", r)
	}
	c.Catalog.Driver, c.Catalog.DSN = DriverPostgres, ""
	if r := c.Resolved(); r.Catalog.DSN != "" {
		t.Errorf("postgres DSN derived: %q", r.Catalog.DSN)
	}
}

// A bad PostgreSQL DSN is refused without showing it: it may hold a
// password.
func TestPostgresDSNNotShown(t *testing.T) {
	c := Default()
	c.Catalog.Driver, c.Catalog.DSN = DriverPostgres, "postgres://convene:s3cr3t@db.example:http/convene"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "catalog.dsn") {
		t.Fatalf("Validate = %v, want a catalog.dsn error", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("the error shows the password: %v", err)
	}
}

func TestDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, 250 * time.Millisecond, 2 * time.Second, 90 * time.Second, 26 * time.Hour} {
		// Text.
		text, err := Duration(d).MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Duration
		if err := got.UnmarshalText(text); err != nil || got.Std() != d {
			t.Errorf("text %s: got %v, %v", text, got, err)
		}
		// Env and flag.
		cfg, _, err := Load("", []string{"CONVENE_HEARTBEAT_INTERVAL=" + string(text)},
			[]string{"-shutdown-timeout", string(text)})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HeartbeatInterval.Std() != d || cfg.ShutdownTimeout.Std() != d {
			t.Errorf("%v: env/flag got %v / %v", d, cfg.HeartbeatInterval, cfg.ShutdownTimeout)
		}
	}

	// Whole config through YAML and back via Load.
	c := Default()
	c.HeartbeatInterval = Duration(1500 * time.Millisecond)
	c.ShutdownTimeout = Duration(time.Minute + 5*time.Second)
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("heartbeat_interval: 1.5s")) || !bytes.Contains(out, []byte("shutdown_timeout: 1m5s")) {
		t.Errorf("marshalled YAML:\n%s", out)
	}
	back, _, err := Load(writeFile(t, string(out)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: got %+v, want %+v", back, c)
	}
}
