package mixbench

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/janus"
)

// server is a mixing server under test: it turns each session's members
// into mixed endpoints (and sets where they send).
type server interface {
	addSession(ctx context.Context, id int, members []*Member) error
	pid() int
	version() string
	stop()
}

// conveneMixer is a `convene serve` node: a session per session, a member
// per member, each with one sendrecv RTP link that hears the mix (mix-minus
// its own voice, since the link is tied to the member).
type conveneMixer struct {
	n     *convene.Node
	codec Codec
}

func startConveneMixer(cfg Config, c Codec) (*conveneMixer, error) {
	n, err := convene.Start(convene.Options{Bin: cfg.Convene, Tmp: cfg.Tmp, Pin: cfg.Pin, Nice: cfg.Nice, Args: conveneArgs(cfg)})
	if err != nil {
		return nil, err
	}
	return &conveneMixer{n: n, codec: c}, nil
}

// conveneArgs are the flags the benchmark adds to `convene serve`: the
// admission limits are lifted (mixer.max, a count of mixers, 200 by
// default; mixer.cores, the mixers' measured load, 0.8 of the node's CPUs),
// so that the frames on time decide how many sessions a core mixes, as
// they do for AudioBridge, which has no such limit. ServeArgs come after
// and may set them again.
func conveneArgs(cfg Config) []string {
	return append([]string{"-mixer-max", "100000", "-mixer-cores", "64"}, cfg.ServeArgs...)
}

func (c *conveneMixer) pid() int        { return c.n.PID() }
func (c *conveneMixer) version() string { return c.n.Version }
func (c *conveneMixer) stop()           { c.n.Stop() }

func (c *conveneMixer) addSession(_ context.Context, id int, ms []*Member) error {
	var s struct{ ID string }
	if err := c.n.API("POST", "/api/v1/sessions", map[string]string{"name": "mix-" + strconv.Itoa(id)}, &s); err != nil {
		return err
	}
	for i, m := range ms {
		var j struct{ Member struct{ ID string } }
		if err := c.n.API("POST", "/api/v1/sessions/"+s.ID+"/members", map[string]string{"name": "m" + strconv.Itoa(i), "role": "participant"}, &j); err != nil {
			return err
		}
		var l struct {
			Local struct {
				RTPPort int `json:"rtp_port"`
			} `json:"local"`
		}
		if err := c.n.API("POST", "/api/v1/sessions/"+s.ID+"/rtp-links", map[string]any{"remote": m.Addr.String(), "rtcp_mux": true,
			"kind": "audio", "direction": "sendrecv", "member": j.Member.ID, "mix": c.codec.ConveneMix}, &l); err != nil {
			return err
		}
		m.setDst(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(l.Local.RTPPort)))
	}
	return nil
}

// janusMixer is Janus with the AudioBridge plugin: a room per session at
// the codec's rate, a plain RTP participant per member.
type janusMixer struct {
	j     *janus.Server
	s     *janus.Session
	admin *janus.Handle
	codec Codec
	mu    sync.Mutex
	hs    []*janus.Handle
}

// audioBridgeConfig allows plain RTP participants on loopback; no rooms
// are configured (each run creates its own).
const audioBridgeConfig = `general: {
	local_ip = "127.0.0.1"
	rtp_port_range = "10000-19999"
}
`

func startJanusMixer(ctx context.Context, cfg Config, c Codec) (*janusMixer, error) {
	j, err := janus.Start(janus.Options{Dir: filepath.Join(cfg.Tmp, "janus-"+c.Name), Plugin: "audiobridge",
		PluginConfig: audioBridgeConfig, Pin: cfg.Pin, Nice: cfg.Nice})
	if err != nil {
		return nil, err
	}
	m := &janusMixer{j: j, codec: c}
	if m.s, err = janus.NewSession(ctx, j.URL); err != nil {
		j.Stop()
		return nil, err
	}
	if m.admin, err = m.s.Attach(ctx, "janus.plugin.audiobridge"); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

func (m *janusMixer) pid() int        { return m.j.PID() }
func (m *janusMixer) version() string { return m.j.Version }
func (m *janusMixer) stop() {
	if m.s != nil {
		m.s.Close()
	}
	m.j.Stop()
}

func (m *janusMixer) addSession(ctx context.Context, id int, ms []*Member) error {
	room := 1000 + id
	if _, err := m.admin.Request(ctx, map[string]any{"request": "create", "room": room, "sampling_rate": m.codec.JanusRate,
		"allow_rtp_participants": true, "audiolevel_ext": false, "permanent": false}); err != nil {
		return fmt.Errorf("create room %d: %w", room, err)
	}
	for i, mb := range ms {
		h, err := m.s.Attach(ctx, "janus.plugin.audiobridge")
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.hs = append(m.hs, h)
		m.mu.Unlock()
		rtp := map[string]any{"ip": mb.Addr.Addr().String(), "port": mb.Addr.Port()}
		join := map[string]any{"request": "join", "room": room, "display": "m" + strconv.Itoa(i), "codec": m.codec.JanusCodec, "rtp": rtp}
		if m.codec.Spec.Name == "opus" {
			// Convene's Opus encoder settings (internal/codec): 32 kbit/s,
			// complexity 5, in-band FEC for 5% loss.
			rtp["payload_type"], rtp["fec"] = m.codec.Spec.PT, true
			join["bitrate"], join["quality"], join["expected_loss"] = 32000, 5, 5
		}
		ev, err := h.Message(ctx, join, nil, "joined")
		if err != nil {
			return fmt.Errorf("join room %d: %w", room, err)
		}
		r, _ := janus.Data(ev)["rtp"].(map[string]any)
		ip, _ := r["ip"].(string)
		port, _ := r["port"].(float64)
		a, err := netip.ParseAddr(ip)
		if err != nil || port == 0 {
			return fmt.Errorf("janus joined room %d without an RTP address: %v", room, janus.Data(ev))
		}
		mb.setDst(netip.AddrPortFrom(a, uint16(port)))
	}
	return nil
}

// missedTicks is Convene's count of 20 ms frames its mixers could not
// produce in time (convene_mixer_missed_ticks_total), -1 when unknown.
func (c *conveneMixer) missedTicks() float64 {
	if v, ok := c.n.Metric("convene_mixer_missed_ticks_total"); ok {
		return v
	}
	return -1
}
