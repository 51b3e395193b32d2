package config

import (
	"bytes"
	"encoding"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Load builds a Config from Default, then the YAML file, then env, then
// the flags in args, each overriding the previous, and validates it.
//
// The file is the -config flag if given, else path, else $CONVENE_CONFIG;
// if none is set (or the chosen one is "") no file is read. env has the
// os.Environ form "KEY=value"; when a variable appears more than once the
// last wins. Variables starting with CONVENE_ that name no key are an
// error. args are the command-line arguments after the subcommand; Load
// returns the positional arguments left after the flags. Errors from -h or
// -help satisfy errors.Is(err, flag.ErrHelp); use PrintFlags to show usage.
//
// The returned Config is not resolved: call Resolved before use.
func Load(path string, env []string, args []string) (Config, []string, error) {
	fs, configFlag, flags := newFlagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, nil, err
		}
		return Config{}, nil, fmt.Errorf("config: %w", err)
	}

	envVals, err := parseEnv(env)
	if err != nil {
		return Config{}, nil, err
	}

	file := path
	if configFlag.set {
		file = configFlag.val
	} else if file == "" {
		file = envVals.config
	}

	cfg := Default()
	if file != "" {
		if err := loadFile(&cfg, file); err != nil {
			return Config{}, nil, err
		}
	}
	root := reflect.ValueOf(&cfg).Elem()
	for _, e := range envVals.vals {
		v := root.FieldByIndex(e.key.index)
		if err := setString(v, e.val); err != nil {
			return Config{}, nil, fmt.Errorf("config: environment variable %s: %w", e.key.env, err)
		}
	}
	for _, f := range flags {
		if f.raw != nil {
			if err := setString(root.FieldByIndex(f.key.index), *f.raw); err != nil {
				// Already checked by Set.
				return Config{}, nil, fmt.Errorf("config: flag -%s: %w", f.key.flag, err)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, err
	}
	return cfg, fs.Args(), nil
}

// PrintFlags writes the usage of the flags Load accepts to w, in the format
// of flag.PrintDefaults.
func PrintFlags(w io.Writer) {
	fs, _, _ := newFlagSet()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// key is one leaf of Config, addressed by its yaml path.
type key struct {
	path  string // "rtp.port"
	env   string // "CONVENE_RTP_PORT"
	flag  string // "rtp-port"
	index []int  // reflect field index in Config
	typ   reflect.Type
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// keys lists every leaf of Config in declaration order.
var keys = sync.OnceValue(func() []key {
	var out []key
	collectKeys(reflect.TypeFor[Config](), nil, nil, &out)
	return out
})

var keysByEnv = sync.OnceValue(func() map[string]*key {
	m := make(map[string]*key)
	ks := keys()
	for i := range ks {
		m[ks[i].env] = &ks[i]
	}
	return m
})

func collectKeys(t reflect.Type, path []string, index []int, out *[]key) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, ok := yamlName(sf)
		if !ok {
			continue
		}
		p := append(path[:len(path):len(path)], name)
		idx := append(index[:len(index):len(index)], i)
		if !isLeaf(sf.Type) {
			collectKeys(sf.Type, p, idx, out)
			continue
		}
		*out = append(*out, key{
			path:  strings.Join(p, "."),
			env:   EnvPrefix + strings.ToUpper(strings.Join(p, "_")),
			flag:  strings.ReplaceAll(strings.Join(p, "-"), "_", "-"),
			index: idx,
			typ:   sf.Type,
		})
	}
}

// yamlName returns the key yaml.v3 uses for sf.
func yamlName(sf reflect.StructField) (string, bool) {
	if !sf.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(sf.Name)
	}
	return name, true
}

func isLeaf(t reflect.Type) bool {
	return t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(textUnmarshaler)
}

func fieldByYAMLName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		if n, ok := yamlName(sf); ok && n == name {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

// want describes the values a leaf of type t accepts.
func want(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return wantDuration
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// setString parses s into the addressable leaf v.
func setString(v reflect.Value, s string) error {
	bad := fmt.Errorf("invalid value %q (want %s)", s, want(v.Type()))
	if tu, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		if tu.UnmarshalText([]byte(s)) != nil {
			return bad
		}
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return bad
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return bad
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported config field type %s", v.Type())
	}
	return nil
}

// Environment.

type envVal struct {
	key *key
	val string
}

type envValues struct {
	config string   // $CONVENE_CONFIG
	vals   []envVal // in key order, last occurrence wins
}

func parseEnv(env []string) (envValues, error) {
	var out envValues
	byEnv := keysByEnv()
	set := make(map[*key]string)
	var errs []error
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if name == EnvConfigFile {
			out.config = val
			continue
		}
		k, ok := byEnv[name]
		if !ok {
			errs = append(errs, fmt.Errorf("config: unknown environment variable %s", name))
			continue
		}
		set[k] = val
	}
	if len(errs) > 0 {
		return envValues{}, errors.Join(errs...)
	}
	ks := keys()
	for i := range ks {
		if v, ok := set[&ks[i]]; ok {
			out.vals = append(out.vals, envVal{&ks[i], v})
		}
	}
	return out, nil
}

// Flags.

// flagUsage documents each key's flag. The back-quoted word is the
// argument name shown by PrintFlags.
var flagUsage = map[string]string{
	"node_id":                      "`id` of this node in the cluster (default: the hostname)",
	"data_dir":                     "`directory` for persistent node state such as the SQLite catalog",
	"http.addr":                    "`host:port` the HTTP API and signalling server listens on",
	"http.public_url":              "base `URL` clients reach the API and web app at, named by other nodes' over-capacity refusals (default: http://<http.addr> for a specific IP)",
	"http.pprof":                   "serve Go's profiler under /debug/pprof/ (for benchmarks; keep off in production)",
	"http.metrics_token":           "bearer `token` that may read /metrics besides the operator's API key",
	"http.request_timeout":         "`duration` allowed to read a request body and write its answer",
	"http.idle_timeout":            "close an idle keep-alive connection after this `duration`",
	"http.ws_max_per_session":      "most event WebSockets open on one session",
	"http.ws_max":                  "most event WebSockets open on the node",
	"http.ws_ping":                 "event WebSocket keep-alive `duration`; a client silent for it is dropped",
	"rtp.addr":                     "`IP` address the RTP/RTCP media sockets bind",
	"rtp.port":                     "shared RTP UDP `port`; RTCP uses port+1; 0 picks a free pair",
	"rtp.queue":                    "per-subscriber media queue bound, in `packets`",
	"rtp.writers":                  "goroutines sending on each media socket; 0 means one per CPU",
	"rtp.batch":                    "send media in sendmmsg batches",
	"relay.addr":                   "`IP` address the RTP relay binds and advertises in rewritten SDP",
	"relay.port_min":               "lowest UDP `port` of the RTP relay",
	"relay.port_max":               "highest UDP `port` of the RTP relay",
	"relay.timeout":                "end a relayed call after this `duration` without media",
	"relay.ng_addr":                "serve rtpengine's ng control protocol on this UDP `host:port`; empty turns it off",
	"relay.kernel":                 "forward established IPv4 flows in the kernel (eBPF) when the node may load a program",
	"relay.max_packet":             "largest UDP payload in `bytes` the RTP relay forwards (user space and kernel)",
	"relay.latch_window":           "`duration` after an offer/answer in which a party behind NAT may be latched onto from another IP",
	"relay.max_streams_per_call":   "most relayed streams (m= lines) one call may hold",
	"relay.max_streams_per_user":   "most relayed streams one authenticated SIP user's calls may hold",
	"relay.max_streams_per_source": "most relayed streams the calls from one signalling source IP may hold",
	"webrtc.enabled":               "serve WebRTC: the browsers' signalling socket, WHIP and WHEP",
	"webrtc.addr":                  "IP address WebRTC media is received on (empty: rtp.addr)",
	"webrtc.udp_port":              "one UDP port for all peer connections (0: a port each from port_min..port_max)",
	"webrtc.port_min":              "lowest UDP port of a peer connection when udp_port is 0",
	"webrtc.port_max":              "highest UDP port of a peer connection when udp_port is 0",
	"webrtc.tcp_port":              "accept ICE over TCP on this port (0: off)",
	"webrtc.public_ips":            "comma-separated addresses to name in candidates (1:1 NAT)",
	"webrtc.ice_servers":           "stun: and turn: URLs handed to clients",
	"webrtc.turn_username":         "username for the turn: URLs in ice_servers",
	"webrtc.turn_credential":       "credential for the turn: URLs in ice_servers",
	"webrtc.max_peers":             "most peer connections on the node (a browser has two)",
	"webrtc.max_tracks":            "most tracks one peer may publish",
	"webrtc.max_bitrate":           "upper bound of a subscriber's bandwidth estimate, bit/s",
	"webrtc.place_near":            "in a cluster, send a joining browser to the session's owner within this round trip (0: off)",
	"webrtc.direct_audio":          "send subscribers' media and read publishers' with the node's own SRTP, past pion's send and receive chains (false: pion's chains; the name is from when only audio went direct)",
	"sip.listen":                   "`host:port` of the SIP UDP and TCP listeners",
	"sip.advertise":                "`host` put in Via and Record-Route; empty means the listen host",
	"sip.domain":                   "SIP `domain` and digest realm; empty means the advertised host",
	"sip.expires":                  "registration lifetime `duration` granted when a client asks for none",
	"sip.nat_expires":              "longest registration `duration` granted to clients behind NAT",
	"sip.probe_interval":           "`duration` between OPTIONS probes of registered contacts; 0 turns them off",
	"sip.algorithms":               "digest `algorithms` challenged, in order of preference: MD5,SHA-256 or SHA-256,MD5",
	"sip.auth_calls":               "challenge INVITEs with 407 Proxy Authentication Required",
	"sip.register_rate":            "REGISTERs per second allowed from one source IP; 0 means no limit",
	"sip.invite_rate":              "INVITEs per second allowed from one source IP; 0 means no limit",
	"sip.request_rate":             "requests of every other method per second allowed from one source IP; 0 means no limit",
	"sip.max_contacts":             "most contacts one SIP account may register",
	"sip.tcp_idle_timeout":         "close a SIP TCP connection idle for this `duration`",
	"sip.tcp_max_conns":            "most SIP TCP connections accepted at once",
	"sip.tcp_max_conns_per_ip":     "most SIP TCP connections accepted at once from one IP",
	"sip.min_password_length":      "shortest SIP account password accepted, in characters",
	"nats.url":                     "`URL` of an external NATS server; empty runs an embedded in-process server",
	"nats.media_batch":             "longest `duration` a packet bridged to another node waits for others going there, to cross as one message (0: at once)",
	"nats.listen":                  "embedded NATS only: also accept outside clients on this `host:port`; empty means in-process only",
	"catalog.driver":               "catalog database `driver`: sqlite or postgres",
	"catalog.dsn":                  "catalog database `DSN` (default for sqlite: <data_dir>/convene.db)",
	"sessions.max":                 "most sessions not over (scheduled or live) the node holds",
	"sessions.max_members":         "most members one session may have",
	"mixer.speakers":               "how many of the loudest inputs an audio mix carries",
	"mixer.depth":                  "an audio mixer's jitter buffer depth in 20 ms frames",
	"mixer.max":                    "most audio mixers (one per session subgroup with mixed endpoints) the node runs at once",
	"mixer.cores":                  "CPU the audio mixers may use, in `cores`, by their measured load; 0 means 0.8 of the node's CPUs",
	"capacity.pps":                 "the node's delivery capacity in `packets/s` sent; 0 measures it",
	"capacity.headroom":            "fraction of the capacity kept free of new joins, links and mixers",
	"recording.dir":                "directory of the recordings, one directory each; empty means <data_dir>/recordings",
	"recording.capacity_mbps":      "disk capacity for recordings in `Mb/s` (128 kb/s per audio and 2.5 Mb/s per video track reserved); 0 measures it at start-up",
	"recording.quota_mb":           "`megabytes` one owner's recordings may take; 0 means no quota",
	"recording.adhoc_max":          "most ad-hoc recordings (RTP endpoints with no session) at once; 0 means none",
	"recording.playbacks":          "most recordings played at once",
	"recording.exports":            "most recordings exported at once",
	"streaming.ffmpeg":             "the ffmpeg `binary` HLS streams and thumbnails run",
	"streaming.hls_max":            "most sessions streamed as HLS at once",
	"streaming.hls_segment":        "`duration` of an HLS segment (players without LL-HLS fetch whole segments; LL-HLS ones parts of about 200 ms)",
	"streaming.thumbnails_max":     "most video tracks whose thumbnails are taken at once",
	"composite.max":                "most video composites (an ffmpeg child each) the node runs at once",
	"composite.cores":              "CPU the video composites' ffmpeg children may use, in `cores`, by their measured load; 0 means half the node's CPUs",
	"vtranscode.max":               "most video transcoders (an ffmpeg child per source, codec, size and rate) the node runs at once; 0 means none",
	"vtranscode.cores":             "CPU the video transcoders' ffmpeg children may use, in `cores`, by their measured load; 0 means half the node's CPUs",
	"vtranscode.max_height":        "largest picture a video transcoder encodes, in `lines` (16:9)",
	"vtranscode.max_fps":           "most frames a second a video transcoder encodes",
	"auth.api_keys":                "operator API `keys`, comma-separated; empty: one is made in <data_dir>/api_key",
	"links.allow_destinations":     "`CIDRs`, comma-separated, members' links may send to although loopback, link-local, multicast, broadcast or this host's",
	"links.max_per_member":         "most media links one session member may have",
	"links.max_per_session":        "most media links the members of one session may create",
	"links.consent":                "`duration` a member's link may hear nothing from its remote before the node stops sending to it",
	"auth.token_secret":            "`secret` signing join tokens; empty: one is made in <data_dir>/token_secret",
	"log.level":                    "log `level`: debug, info, warn or error",
	"log.format":                   "log `format`: text or json",
	"log.stall_trace":              "`directory` for Go execution traces of the seconds around a media stall (a send or read waiting past 100 ms in the node; at most 5 files; costs a few per cent of CPU while set)",
	"heartbeat_interval":           "`duration` between node heartbeats, e.g. 2s",
	"shutdown_timeout":             "maximum `duration` of a graceful shutdown, e.g. 10s",
}

// keyFlag is the flag.Value of one key. It records the raw value so that
// flags can be applied after the file and environment.
type keyFlag struct {
	key *key
	def string
	raw *string
}

func (f *keyFlag) String() string {
	switch {
	case f == nil || f.key == nil:
		return ""
	case f.raw != nil:
		return *f.raw
	}
	return f.def
}

func (f *keyFlag) Set(s string) error {
	if setString(reflect.New(f.key.typ).Elem(), s) != nil {
		// The flag package adds: invalid value "s" for flag -name.
		return errors.New("want " + want(f.key.typ))
	}
	f.raw = &s
	return nil
}

func (f *keyFlag) IsBoolFlag() bool { return f.key != nil && f.key.typ.Kind() == reflect.Bool }

type stringFlag struct {
	val string
	set bool
}

func (f *stringFlag) String() string {
	if f == nil {
		return ""
	}
	return f.val
}

func (f *stringFlag) Set(s string) error { f.val, f.set = s, true; return nil }

func newFlagSet() (*flag.FlagSet, *stringFlag, []*keyFlag) {
	fs := flag.NewFlagSet("convene", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cf := new(stringFlag)
	fs.Var(cf, "config", "YAML config `file` (env "+EnvConfigFile+")")
	def := reflect.ValueOf(Default())
	ks := keys()
	flags := make([]*keyFlag, len(ks))
	for i := range ks {
		k := &ks[i]
		usage := flagUsage[k.path]
		if usage == "" {
			usage = "sets " + k.path
		}
		f := &keyFlag{key: k, def: fmt.Sprint(def.FieldByIndex(k.index).Interface())}
		fs.Var(f, k.flag, usage+" (env "+k.env+")")
		flags[i] = f
	}
	return fs, cf, flags
}

// File.

func loadFile(cfg *Config, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// First pass on the node tree, for errors that name the file, line and
	// full key path; the second pass decodes.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return fmt.Errorf("config: %s: %w", file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return fmt.Errorf("config: %s: %w", file, err)
		}
		return fmt.Errorf("config: %s:%d: more than one YAML document", file, extra.Line)
	}
	if len(doc.Content) != 1 {
		return nil
	}
	if errs := checkNode(file, doc.Content[0], reflect.TypeFor[Config](), ""); len(errs) > 0 {
		return errors.Join(errs...)
	}

	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %s: %w", file, err)
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// checkNode checks the mapping n against struct type t.
func checkNode(file string, n *yaml.Node, t reflect.Type, prefix string) []error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		return nil // empty section: keep the defaults
	}
	if n.Kind != yaml.MappingNode {
		what := "top level"
		if prefix != "" {
			what = prefix
		}
		return []error{fmt.Errorf("config: %s:%d: %s: want a mapping of keys, got %s",
			file, n.Line, what, kindName(n))}
	}
	var errs []error
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("config: %s:%d: duplicate key %s (first at line %d)",
				file, k.Line, path, first))
			continue
		}
		seen[k.Value] = k.Line
		sf, ok := fieldByYAMLName(t, k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("config: %s:%d: unknown key %s", file, k.Line, path))
			continue
		}
		if !isLeaf(sf.Type) {
			errs = append(errs, checkNode(file, v, sf.Type, path)...)
			continue
		}
		for v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch {
		case v.Kind != yaml.ScalarNode:
			errs = append(errs, fmt.Errorf("config: %s:%d: %s: want %s, got %s",
				file, v.Line, path, want(sf.Type), kindName(v)))
		case isNull(v):
			errs = append(errs, fmt.Errorf("config: %s:%d: %s: missing value (want %s; write \"\" for an empty string)",
				file, v.Line, path, want(sf.Type)))
		default:
			if err := v.Decode(reflect.New(sf.Type).Interface()); err != nil {
				errs = append(errs, fmt.Errorf("config: %s:%d: %s: invalid value %q (want %s)",
					file, v.Line, path, v.Value, want(sf.Type)))
			}
		}
	}
	return errs
}
