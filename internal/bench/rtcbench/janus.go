package rtcbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// Janus is a Janus Gateway process (Debian's package janus) serving one
// VideoRoom over its HTTP transport on loopback, configured like
// Convene's node: ICE-lite, one host candidate, no trickle.
//
// Janus never gathers candidates on an interface flagged LOOPBACK, so it
// gets an interface of its own that is not: one end of a veth pair holding
// a 127/8 address (janusIP). Its packets still only travel the machine's
// local routes, like Convene's on lo.
type Janus struct {
	URL     string // http://127.0.0.1:port/janus
	Version string
	cmd     *exec.Cmd
	dir     string
	log     bytes.Buffer
}

// JanusRoom is the VideoRoom every run uses.
const JanusRoom = 1234

const (
	janusIf = "cvjanus0"
	janusIP = "127.77.0.1"
)

// janusInterface makes the veth end Janus gathers its candidate on.
func janusInterface() error {
	_ = exec.Command("ip", "link", "del", janusIf).Run()
	for _, args := range [][]string{
		{"link", "add", janusIf, "type", "veth", "peer", "name", janusIf + "p"},
		{"addr", "add", janusIP + "/32", "dev", janusIf},
		{"link", "set", janusIf, "up"},
		{"link", "set", janusIf + "p", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s (Janus's interface needs root)", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// StartJanus writes a configuration into dir and starts Janus with it.
func StartJanus(dir string, pin bool) (*Janus, error) {
	bin, err := exec.LookPath("janus")
	if err != nil {
		return nil, fmt.Errorf("janus is not installed (apt-get install janus): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := janusInterface(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	lib := "/usr/lib/x86_64-linux-gnu/janus"
	files := map[string]string{
		"janus.jcfg": `general: {
	configs_folder = "` + dir + `"
	plugins_folder = "` + lib + `/plugins"
	transports_folder = "` + lib + `/transports"
	events_folder = "` + lib + `/events"
	loggers_folder = "` + lib + `/loggers"
	debug_level = ` + janusDebugLevel() + `
	session_timeout = 120
}
media: {
	rtp_port_range = "21000-29999"
}
nat: {
	ice_lite = true
	full_trickle = false
	ice_enforce_list = "` + janusIf + `"
}
plugins: {
	disable = "libjanus_audiobridge.so,libjanus_duktape.so,libjanus_echotest.so,libjanus_lua.so,libjanus_nosip.so,libjanus_recordplay.so,libjanus_sip.so,libjanus_streaming.so,libjanus_textroom.so,libjanus_videocall.so,libjanus_voicemail.so"
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
		"janus.plugin.videoroom.jcfg": `general: {
}
room-` + strconv.Itoa(JanusRoom) + `: {
	description = "bench"
	publishers = 4
	bitrate = 0
	audiocodec = "opus"
	videocodec = "vp8"
	fir_freq = 0
	notify_joining = false
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	j := &Janus{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/janus", dir: dir}
	j.cmd = exec.Command(bin, "-F", dir, "-C", filepath.Join(dir, "janus.jcfg"), "-o")
	if pin {
		onServerCPU(j.cmd)
	}
	j.cmd.Stdout, j.cmd.Stderr = &syncWriter{w: &j.log}, &syncWriter{w: &j.log}
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
	return nil, fmt.Errorf("janus did not answer on %s: %s", j.URL, j.log.String())
}

// PID returns the process ID.
func (j *Janus) PID() int { return j.cmd.Process.Pid }

// Stop ends the process.
func (j *Janus) Stop() {
	proc.Stop(j.cmd, 3*time.Second)
	_ = exec.Command("ip", "link", "del", janusIf).Run()
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// janusSession is one Janus API session: handles attach to it, and a long
// poll delivers their events by sender.
type janusSession struct {
	url    string
	id     int64
	mu     sync.Mutex
	events map[int64]chan map[string]any
	cancel context.CancelFunc
}

func janusPost(ctx context.Context, url string, body map[string]any) (map[string]any, error) {
	body["transaction"] = strconv.FormatInt(time.Now().UnixNano(), 36)
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out["janus"] == "error" {
		return nil, fmt.Errorf("janus: %v", out["error"])
	}
	return out, nil
}

func dataID(m map[string]any) int64 {
	d, _ := m["data"].(map[string]any)
	f, _ := d["id"].(float64)
	return int64(f)
}

func newJanusSession(ctx context.Context, url string) (*janusSession, error) {
	out, err := janusPost(ctx, url, map[string]any{"janus": "create"})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	s := &janusSession{url: url, id: dataID(out), events: map[int64]chan map[string]any{}, cancel: cancel}
	go s.poll(pctx)
	return s, nil
}

// poll long-polls the session's events (which also keeps it alive).
func (s *janusSession) poll(ctx context.Context) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/"+strconv.FormatInt(s.id, 10)+"?maxev=50", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var evs []map[string]any
		if len(b) > 0 && b[0] == '{' {
			var one map[string]any
			json.Unmarshal(b, &one)
			evs = append(evs, one)
		} else {
			json.Unmarshal(b, &evs)
		}
		for _, ev := range evs {
			sender, _ := ev["sender"].(float64)
			s.mu.Lock()
			ch := s.events[int64(sender)]
			s.mu.Unlock()
			if ch != nil {
				select {
				case ch <- ev:
				default:
				}
			}
		}
	}
}

func (s *janusSession) close() {
	s.cancel()
	janusPost(context.Background(), s.url+"/"+strconv.FormatInt(s.id, 10), map[string]any{"janus": "destroy"})
}

// janusHandle is a VideoRoom plugin handle.
type janusHandle struct {
	s      *janusSession
	id     int64
	events chan map[string]any
}

func (s *janusSession) attach(ctx context.Context) (*janusHandle, error) {
	out, err := janusPost(ctx, s.url+"/"+strconv.FormatInt(s.id, 10), map[string]any{"janus": "attach", "plugin": "janus.plugin.videoroom"})
	if err != nil {
		return nil, err
	}
	h := &janusHandle{s: s, id: dataID(out), events: make(chan map[string]any, 16)}
	s.mu.Lock()
	s.events[h.id] = h.events
	s.mu.Unlock()
	return h, nil
}

// message sends a plugin request (with an SDP when jsep is set) and waits
// for the plugin's event carrying want in its videoroom field.
func (h *janusHandle) message(ctx context.Context, body map[string]any, jsep map[string]any, want string) (map[string]any, error) {
	req := map[string]any{"janus": "message", "body": body}
	if jsep != nil {
		req["jsep"] = jsep
	}
	if _, err := janusPost(ctx, h.s.url+"/"+strconv.FormatInt(h.s.id, 10)+"/"+strconv.FormatInt(h.id, 10), req); err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-h.events:
			pd, _ := ev["plugindata"].(map[string]any)
			d, _ := pd["data"].(map[string]any)
			if e, ok := d["error"]; ok {
				return nil, fmt.Errorf("videoroom: %v", e)
			}
			if want == "" || d["videoroom"] == want || (want == "event" && d["started"] != nil) {
				return ev, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("no %q event from janus: %w", want, ctx.Err())
		}
	}
}

func jsepSDP(ev map[string]any) string {
	j, _ := ev["jsep"].(map[string]any)
	s, _ := j["sdp"].(string)
	return s
}

func janusDebugLevel() string {
	if os.Getenv("JANUS_DEBUG") != "" {
		return "5"
	}
	return "2"
}
