package recbench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/janus"
	"github.com/convene/convene/internal/bench/rtcbench"
	"github.com/convene/convene/internal/rtctest"
)

// server is a recording server under test.
type server interface {
	// addRoom sets up room id with a publisher for each stream (it sets
	// the stream's track and close), records it, and returns its live
	// listener. ctx bounds the setup only.
	addRoom(ctx context.Context, id int, ss []*stream) (liveListener, error)
	pid() int
	version() string
	// recordings is the directory the recordings are written under.
	recordings() string
	// drops is what the server says it dropped so far, of what its
	// recorder had to write and what it had to forward to listeners; -1
	// when it does not say.
	drops() (recorder, forwarding float64)
	// delay is the server's histogram of its own forwarding delay to
	// the listeners (cumulative counts by upper bound in seconds); nil
	// when it does not say.
	delay() map[float64]float64
	stop()
}

// listenerBuffer is the listeners' socket receive buffer: 4 MiB (Linux's
// net.core.rmem_max as Debian sets it; more is cut to it), so that a burst
// of keyframes from every stream of a room, sent on time, is not dropped
// by the load's own kernel while the load's process is busy.
const listenerBuffer = 4 << 20

// waitConnected waits until a publisher's connection is up.
func waitConnected(ctx context.Context, c *rtctest.Client) error {
	return rtctest.WaitFor(ctx, func() bool { return c.Pub.ConnectionState() == webrtc.PeerConnectionStateConnected })
}

// trackOf returns the one track a publisher client sends.
func trackOf(c *rtctest.Client, video bool) *webrtc.TrackLocalStaticRTP {
	a, v := c.LocalTracks()
	if video {
		return v[0]
	}
	return a
}

// waitTracks waits until the listener receives n tracks.
func waitTracks(ctx context.Context, l liveListener, n int) error {
	err := rtctest.WaitFor(ctx, func() bool {
		k := 0
		for _, r := range l.Received() {
			if r.Packets.Load() > 0 {
				k++
			}
		}
		return k >= n
	})
	if err != nil {
		return fmt.Errorf("the listener receives %d of %d streams: %w", len(l.Received()), n, err)
	}
	return nil
}

// conveneRecorder is a `convene serve` node: a session per room, its
// publishers over WHIP, a recording started through the API once they
// are up, and a member over the signalling socket as its listener.
type conveneRecorder struct {
	n   *convene.Node
	dir string
}

// conveneArgs are the flags the benchmark adds to `convene serve`: the
// recordings under dir, and the admission limits lifted (the capacity the
// disk probe measured at start-up, against which a recording reserves
// 128 kb/s per audio and 2.5 Mb/s per video track; the node's delivery
// capacity, capacity.pps, against which joins and links are admitted), so
// that the packets recorded decide, as for Janus, which has no such limit;
// and room for more peer connections than the default 1,000 (each stream
// is a publisher's, each room's listener one more).
// ServeArgs come after and may set them again.
func conveneArgs(cfg Config, dir string) []string {
	return append([]string{"-recording-dir", dir, "-recording-capacity-mbps", "1000000", "-capacity-pps", "1e12", "-webrtc-max-peers", "10000"}, cfg.ServeArgs...)
}

func startConvene(cfg Config, dir string) (*conveneRecorder, error) {
	n, err := convene.Start(convene.Options{Bin: cfg.Convene, Tmp: cfg.Tmp, Pin: cfg.Pin, Nice: cfg.Nice, Args: conveneArgs(cfg, dir)})
	if err != nil {
		return nil, err
	}
	return &conveneRecorder{n: n, dir: dir}, nil
}

func (c *conveneRecorder) pid() int           { return c.n.PID() }
func (c *conveneRecorder) version() string    { return c.n.Version }
func (c *conveneRecorder) recordings() string { return c.dir }
func (c *conveneRecorder) stop()              { c.n.Stop() }

func (c *conveneRecorder) drops() (recorder, forwarding float64) {
	recorder, ok := c.n.Metric("convene_recorder_dropped_packets_total")
	if !ok {
		return -1, -1
	}
	// The forwarding drops have no sample before the first (by reason).
	forwarding, _ = c.n.Metric("convene_webrtc_dropped_packets_total")
	return recorder, forwarding
}

func (c *conveneRecorder) delay() map[float64]float64 { return c.n.Histogram(rtcbench.DelayMetric) }

func (c *conveneRecorder) member(sid string) (string, error) {
	var j struct{ Token struct{ Token string } }
	err := c.n.API("POST", "/api/v1/sessions/"+sid+"/members", map[string]string{"name": "m", "role": "participant"}, &j)
	return j.Token.Token, err
}

func (c *conveneRecorder) addRoom(ctx context.Context, id int, ss []*stream) (liveListener, error) {
	var s struct{ ID string }
	if err := c.n.API("POST", "/api/v1/sessions", map[string]string{"name": "rec-" + strconv.Itoa(id)}, &s); err != nil {
		return nil, err
	}
	for _, st := range ss {
		tok, err := c.member(s.ID)
		if err != nil {
			return nil, err
		}
		pub, _, err := rtctest.WHIP(ctx, c.n.URL, s.ID, tok, rtctest.Options{Audio: !st.shape.Video, Video: st.shape.Video})
		if err != nil {
			return nil, fmt.Errorf("whip: %w", err)
		}
		st.close = pub.Close
		if err := waitConnected(ctx, pub); err != nil {
			return nil, fmt.Errorf("publisher %d: %w", st.id, err)
		}
		st.track = trackOf(pub, st.shape.Video)
	}
	if err := c.n.API("POST", "/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "bench"}, nil); err != nil {
		return nil, err
	}
	tok, err := c.member(s.ID)
	if err != nil {
		return nil, err
	}
	l, err := rtctest.Dial(ctx, c.n.URL, s.ID, tok, rtctest.Options{ReadBuffer: listenerBuffer, Arrivals: true})
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	return l, nil
}

// janusRecorder is Janus with the VideoRoom plugin: a room per room,
// created with record=true and rec_dir, a publisher handle per stream and
// a subscriber of every feed as its listener, all on one Janus session.
type janusRecorder struct {
	j     *janus.Server
	s     *janus.Session
	admin *janus.Handle
	dir   string
}

func startJanus(ctx context.Context, cfg Config, name, dir string) (*janusRecorder, error) {
	j, err := janus.Start(janus.Options{Dir: filepath.Join(cfg.Tmp, "janus-"+name), Plugin: "videoroom", Veth: true, Pin: cfg.Pin, Nice: cfg.Nice,
		PluginConfig: "general: {\n}\n"})
	if err != nil {
		return nil, err
	}
	r := &janusRecorder{j: j, dir: dir}
	if r.s, err = janus.NewSession(ctx, j.URL); err != nil {
		j.Stop()
		return nil, err
	}
	if r.admin, err = r.s.Attach(ctx, "janus.plugin.videoroom"); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func (r *janusRecorder) pid() int                   { return r.j.PID() }
func (r *janusRecorder) version() string            { return r.j.Version }
func (r *janusRecorder) recordings() string         { return r.dir }
func (r *janusRecorder) drops() (float64, float64)  { return -1, -1 }
func (r *janusRecorder) delay() map[float64]float64 { return nil }
func (r *janusRecorder) stop() {
	if r.s != nil {
		r.s.Close()
	}
	r.j.Stop()
}

func (r *janusRecorder) addRoom(ctx context.Context, id int, ss []*stream) (liveListener, error) {
	room := 1000 + id
	if err := r.admin.CreateRoom(ctx, room, map[string]any{"record": true, "rec_dir": r.dir, "publishers": len(ss),
		"audiocodec": "opus", "videocodec": "vp8", "bitrate": 0, "fir_freq": 0, "notify_joining": false, "permanent": false}); err != nil {
		return nil, err
	}
	var feeds []int64
	for _, st := range ss {
		pub, offer, err := rtctest.NewPublisher(rtctest.Options{Audio: !st.shape.Video, Video: st.shape.Video, Interface: janus.Interface})
		if err != nil {
			return nil, err
		}
		st.close = pub.Close
		_, answer, feed, err := r.s.Publish(ctx, room, "p"+strconv.Itoa(int(st.id)), offer)
		if err != nil {
			return nil, fmt.Errorf("publish in room %d: %w", room, err)
		}
		if err := pub.SetAnswer(answer); err != nil {
			return nil, err
		}
		if err := waitConnected(ctx, pub); err != nil {
			return nil, fmt.Errorf("publisher %d: %w", st.id, err)
		}
		st.track = trackOf(pub, st.shape.Video)
		feeds = append(feeds, feed)
	}
	// Janus offers a feed to subscribers once its media is up: try again
	// for a while.
	var h *janus.Handle
	var offer string
	var err error
	for try := 0; try < 20; try++ {
		if h, offer, err = r.s.Subscribe(ctx, room, feeds); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("listener in room %d: %w", room, err)
	}
	l, err := rtctest.NewViewer(rtctest.Options{Interface: janus.Interface, ReadBuffer: listenerBuffer, Arrivals: true})
	if err != nil {
		return nil, err
	}
	ans, err := l.AnswerOffer(offer)
	if err == nil {
		err = h.Start(ctx, ans)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
