// Package janus runs Janus Gateway (Debian's package janus) for the
// benchmarks that compare Convene with it, on loopback only, and speaks its
// HTTP API: sessions, plugin handles, requests and the events that answer
// them. Each benchmark names the one plugin it needs and that plugin's
// configuration; every other plugin and transport stays off.
package janus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convene/convene/internal/bench/proc"
)

// Server is a Janus process serving one plugin over its HTTP transport on
// loopback.
type Server struct {
	URL     string // http://127.0.0.1:port/janus
	Version string
	cmd     *exec.Cmd
	veth    bool
	log     bytes.Buffer
	logMu   sync.Mutex
}

// Options say how to run Janus.
type Options struct {
	Dir string // for its configuration files
	// Plugin is the plugin to load ("videoroom", "audiobridge"); the others
	// are disabled.
	Plugin string
	// PluginConfig is the body of janus.plugin.<Plugin>.jcfg.
	PluginConfig string
	// Veth gives Janus an interface of its own for ICE (see Interface).
	Veth bool
	// Pin runs Janus on the benchmark's server CPU (proc.OnServerCPU).
	Pin bool
	// Nice is its niceness (proc.Nice); 0 leaves it alone.
	Nice int
}

// Janus never gathers ICE candidates on an interface flagged LOOPBACK, so
// a WebRTC benchmark (Options.Veth) gives it an interface of its own that
// is not: one end of a veth pair holding a 127/8 address (IP). Its packets
// still only travel the machine's local routes, like Convene's on lo.
const (
	Interface = "cvjanus0"
	IP        = "127.77.0.1"
)

// plugins are the plugins Debian's package ships.
var plugins = []string{"audiobridge", "duktape", "echotest", "lua", "nosip", "recordplay", "sip", "streaming", "textroom", "videocall", "videoroom", "voicemail"}

// makeInterface makes the veth end Janus gathers its candidate on.
func makeInterface() error {
	_ = exec.Command("ip", "link", "del", Interface).Run()
	for _, args := range [][]string{
		{"link", "add", Interface, "type", "veth", "peer", "name", Interface + "p"},
		{"addr", "add", IP + "/32", "dev", Interface},
		{"link", "set", Interface, "up"},
		{"link", "set", Interface + "p", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s (Janus's interface needs root)", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// Start writes a configuration into o.Dir and starts Janus with it.
func Start(o Options) (*Server, error) {
	bin, err := exec.LookPath("janus")
	if err != nil {
		return nil, fmt.Errorf("janus is not installed (apt-get install janus): %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	enforce := "lo"
	if o.Veth {
		if err := makeInterface(); err != nil {
			return nil, err
		}
		enforce = Interface
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var off []string
	for _, p := range plugins {
		if p != o.Plugin {
			off = append(off, "libjanus_"+p+".so")
		}
	}
	lib := "/usr/lib/x86_64-linux-gnu/janus"
	files := map[string]string{
		"janus.jcfg": `general: {
	configs_folder = "` + o.Dir + `"
	plugins_folder = "` + lib + `/plugins"
	transports_folder = "` + lib + `/transports"
	events_folder = "` + lib + `/events"
	loggers_folder = "` + lib + `/loggers"
	debug_level = ` + debugLevel() + `
	session_timeout = 120
}
media: {
	rtp_port_range = "21000-29999"
}
nat: {
	ice_lite = true
	full_trickle = false
	ice_enforce_list = "` + enforce + `"
}
plugins: {
	disable = "` + strings.Join(off, ",") + `"
}
transports: {
	disable = "libjanus_websockets.so,libjanus_pfunix.so,libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_rabbitmq.so"
}
events: {
	broadcast = false
}
`,
		"janus.transport.http.jcfg": `general: {
	base_path = "/janus"
	http = true
	port = ` + strconv.Itoa(port) + `
	ip = "127.0.0.1"
	https = false
}
admin: {
	admin_http = false
}
`,
		"janus.plugin." + o.Plugin + ".jcfg": o.PluginConfig,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(o.Dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	j := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/janus", veth: o.Veth}
	j.cmd = exec.Command(bin, "-F", o.Dir, "-C", filepath.Join(o.Dir, "janus.jcfg"), "-o")
	if o.Pin {
		proc.OnServerCPU(j.cmd)
	}
	proc.Nice(j.cmd, o.Nice)
	j.cmd.Stdout, j.cmd.Stderr = j, j
	if err := j.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(j.URL + "/info")
		if err == nil {
			var info struct {
				Version string `json:"version_string"`
			}
			json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			j.Version = "Janus " + info.Version
			return j, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	j.Stop()
	return nil, fmt.Errorf("janus did not answer on %s: %s", j.URL, j.Log())
}

// Write collects Janus's output (its log).
func (j *Server) Write(p []byte) (int, error) {
	j.logMu.Lock()
	defer j.logMu.Unlock()
	return j.log.Write(p)
}

// Log returns what Janus has printed so far.
func (j *Server) Log() string {
	j.logMu.Lock()
	defer j.logMu.Unlock()
	return j.log.String()
}

// PID returns the process ID.
func (j *Server) PID() int { return j.cmd.Process.Pid }

// Stop ends the process (and removes its interface).
func (j *Server) Stop() {
	proc.Stop(j.cmd, 3*time.Second)
	if j.veth {
		_ = exec.Command("ip", "link", "del", Interface).Run()
	}
}

func debugLevel() string {
	if os.Getenv("JANUS_DEBUG") != "" {
		return "5"
	}
	return "2"
}
