package composite

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/supervise"
)

// Timing of a composite's goroutine.
const (
	tick = 500 * time.Millisecond
	// silent is how long a camera may send nothing and still be shown.
	silent = 2 * time.Second
	// settle is the least time between two changes of the cameras shown
	// (each starts a new child).
	settle = 2 * time.Second
	// A camera shown whose feed has waited keyless for a keyframe (it
	// sends only frames that refer to one it never sent, and does not
	// answer keyframe requests: a plain RTP camera, a broken sender) would
	// stall the whole picture, every camera's (the child's frame sync
	// waits for each input): it is left out until it is seen sending a
	// keyframe, and asked for one every askEvery meanwhile.
	keyless  = 6 * time.Second
	askEvery = 10 * time.Second
)

// Composite is one running composite of a session.
type Composite struct {
	s       *Service
	id      string
	session string
	req     Request
	room    *broker.Room
	cells   []Rect
	dir     string
	clock   *ffmpeg.Clock
	ports   []int // a cell's input port on 127.0.0.1
	outlet  Outlet
	out     *ffmpeg.Output
	started time.Time
	stop    chan struct{}
	done    chan struct{}
	load    atomic.Uint64 // the child's CPU in millicores, smoothed

	mu       sync.Mutex
	proc     *ffmpeg.Proc // nil before the first tick
	unwatch  func()
	slots    []slot
	speakers []string
	heard    map[*broker.Track]heard
	benched  map[*broker.Track]*bench // left out until seen sending a keyframe
	changed  time.Time                // when the cameras shown last changed
	graph    string                   // the child's filter graph for the slots
	inputs   int                      // m-lines in its SDP
}

// slot is what one cell shows.
type slot struct {
	track *broker.Track
	name  string
	feed  *ffmpeg.Feed
	untap func()
}

// heard is when a track's packet count last moved.
type heard struct {
	packets uint64
	at      time.Time
}

// choice is a cell's camera and name.
type choice struct {
	track *broker.Track
	name  string
}

// Info describes a running composite.
type Info struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	Request
	// Track is the output track's ID, Member the session member that
	// publishes it.
	Track  string `json:"track"`
	Member string `json:"member"`
	// Showing are the track IDs of the cells now ("" for a black one).
	Showing   []string  `json:"showing"`
	StartedAt time.Time `json:"started_at"`
	Restarts  uint64    `json:"restarts"`
	Frames    uint64    `json:"frames"`
	LoadCores float64   `json:"load_cores"`
}

func (c *Composite) info() Info {
	i := Info{ID: c.id, Session: c.session, Request: c.req, Track: c.outlet.Track.ID(), Member: c.outlet.Member,
		StartedAt: c.started, Frames: c.out.Frames(), LoadCores: float64(c.load.Load()) / 1000}
	i.Tracks = slices.Clone(c.req.Tracks)
	c.mu.Lock()
	for _, sl := range c.slots {
		id := ""
		if sl.track != nil {
			id = sl.track.ID()
		}
		i.Showing = append(i.Showing, id)
	}
	p := c.proc
	c.mu.Unlock()
	if p != nil && p.Starts() > 1 {
		i.Restarts = p.Starts() - 1
	}
	return i
}

// pid is the running child's process ID (0 for none).
func (c *Composite) pid() int {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p == nil {
		return 0
	}
	return p.PID()
}

func (c *Composite) status() supervise.Status {
	c.mu.Lock()
	p, in := c.proc, c.inputs
	c.mu.Unlock()
	st := supervise.Status{Kind: "composite", ID: "composite:" + c.id, Session: c.session, Inputs: in, Outputs: 1,
		Load: float64(c.load.Load()) / 1000}
	if p != nil {
		st.Beats = p.Beats()
	}
	return st
}

// run looks at the room every tick until the composite stops.
func (c *Composite) run() {
	defer close(c.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	var cpu ffmpeg.CPUMeter
	for {
		select {
		case <-c.stop:
			return
		case <-c.outlet.Gone:
			c.s.o.Logger.Info("composite ends: the session took its track", "composite", c.id, "session", c.session)
			go func() { _ = c.s.Stop(c.session, c.id) }()
			return
		case now := <-t.C:
			if c.s.o.Rooms(c.session) != c.room {
				c.s.o.Logger.Info("composite ends with its session", "composite", c.id, "session", c.session)
				go func() { _ = c.s.Stop(c.session, c.id) }()
				return
			}
			c.step(now)
			if pid := c.pid(); pid != 0 {
				if cores, ok := cpu.Smooth(pid, now); ok {
					c.load.Store(uint64(cores * 1000))
				}
			}
		}
	}
}

// step shows the cameras it should, starting the child the first time
// and a new one when they changed; it sends the feeds' sender reports.
func (c *Composite) step(now time.Time) {
	want := c.choose(now)
	c.mu.Lock()
	first := c.proc == nil
	if !c.same(want) && (first || now.Sub(c.changed) >= settle) {
		c.apply(want)
		c.changed = now
		if !first {
			c.s.o.Metrics.layouts.Inc()
			c.proc.Kill() // the next child reads the new SDP and graph
		}
	}
	if first {
		c.startLocked()
	}
	feeds, proc := c.feedsLocked(), c.proc
	c.mu.Unlock()
	for _, f := range feeds {
		f.Report(now)
	}
	// A keyframe that reaches the child's port before ffmpeg binds it is
	// lost, and its frame sync waits for every input.
	proc.CheckKeyframes(now)
}

// feedsLocked are the feeds of the cells that show a camera (under mu).
func (c *Composite) feedsLocked() []*ffmpeg.Feed {
	feeds := make([]*ffmpeg.Feed, 0, len(c.slots))
	for _, sl := range c.slots {
		if sl.track != nil {
			feeds = append(feeds, sl.feed)
		}
	}
	return feeds
}

// startLocked starts the child and puts it under the supervisor (under mu).
func (c *Composite) startLocked() {
	c.proc = ffmpeg.Start(ffmpeg.ProcOptions{Name: "composite " + c.id, Path: c.s.o.FFmpeg, Args: c.args,
		OnStart: c.onStart, Rekey: c.askKeyframes, Logger: c.s.o.Logger})
	if c.s.o.Supervisor != nil {
		proc := c.proc
		c.unwatch = c.s.o.Supervisor.Add("composite", "composite:"+c.id, c.status, proc.Kill)
	}
}

// onStart runs when a child starts: it decodes every camera from a
// keyframe, which the feeds ask the cameras' publishers for (a PLI to a
// browser).
func (c *Composite) onStart() {
	c.s.o.Metrics.starts.Inc()
	c.mu.Lock()
	feeds := c.feedsLocked()
	c.mu.Unlock()
	for _, f := range feeds {
		f.Restarted()
	}
}

// askKeyframes has the feeds ask the cameras for keyframes again: the
// child has made no frame since they last asked (ffmpeg.Proc.Rekey).
func (c *Composite) askKeyframes() {
	c.mu.Lock()
	feeds := c.feedsLocked()
	c.mu.Unlock()
	for _, f := range feeds {
		f.AskKeyframe()
	}
}

// choose picks each cell's camera: the asked-for tracks in their cells,
// else the room's cameras in their members' join order (the first
// speaker's first in the speaker layout, and the speakers' first when
// there are more cameras than cells). Only the main session's cameras
// (not a subgroup's) heard within silent; of a simulcast camera, its
// highest layer heard.
func (c *Composite) choose(now time.Time) []choice {
	members := c.s.o.Members(c.session)
	rank := make(map[string]int, len(members))
	names := make(map[string]string, len(members))
	for i, m := range members {
		rank[m.ID], names[m.ID] = i, m.Name
	}
	own := c.s.owners()
	var all, live []*broker.Track
	c.mu.Lock()
	for _, sl := range c.slots {
		if sl.track != nil && sl.feed.Keyless(now) >= keyless && c.benched[sl.track] == nil {
			if c.benched == nil {
				c.benched = map[*broker.Track]*bench{}
			}
			c.benched[sl.track] = c.benchLocked(sl.track, now)
			c.s.o.Metrics.benched.Inc()
			c.s.o.Logger.Warn("composite leaves out a camera that sends no keyframe until it sends one", "composite", c.id,
				"session", c.session, "track", sl.track.ID())
		}
	}
	inRoom := map[*broker.Track]bool{}
	for _, snd := range c.room.Senders() {
		inRoom[snd.Track] = true
	}
	for t, b := range c.benched {
		switch {
		case b.seen.Load() || !inRoom[t]:
			b.untap()
			delete(c.benched, t)
		case !now.Before(b.ask):
			t.RequestKeyframe()
			b.ask = now.Add(askEvery)
		}
	}
	seen := make(map[*broker.Track]heard, len(c.heard))
	for _, snd := range c.room.Senders() {
		// The main session's cameras only: a tap ignores subgroups, and
		// the picture goes to the main session.
		t := snd.Track
		if t.Kind() != media.Video || snd.Group != "" || own[t.Owner()] {
			continue
		}
		all = append(all, t)
		p, _ := t.Stats()
		h, ok := c.heard[t]
		if !ok || p != h.packets {
			h = heard{packets: p, at: now}
			if !ok && p == 0 {
				h.at = time.Time{} // never sent: not heard yet
			}
		}
		seen[t] = h
		if _, out := c.benched[t]; !out && !h.at.IsZero() && now.Sub(h.at) < silent {
			live = append(live, t)
		}
	}
	c.heard = seen
	best := broker.HighestOf(live) // of a simulcast camera, its highest layer heard
	var cams []*broker.Track
	for _, t := range live {
		if best[broker.SourceOf(t)] == t {
			cams = append(cams, t)
		}
	}
	speakers := c.speakers
	var big *broker.Track
	if len(c.slots) > 0 {
		big = c.slots[0].track
	}
	c.mu.Unlock()

	out := make([]choice, len(c.cells))
	if len(c.req.Tracks) > 0 {
		// An asked-for track stands for its source: any of its layers
		// names the one shown.
		for i, id := range c.req.Tracks {
			for _, t := range all {
				if b := best[broker.SourceOf(t)]; b != nil && (t.ID() == id || t.Publisher() == id) {
					out[i].track = b
				}
			}
		}
	} else {
		slices.SortStableFunc(cams, func(a, b *broker.Track) int {
			ra, oka := rank[a.Owner()]
			rb, okb := rank[b.Owner()]
			switch {
			case oka && okb && ra != rb:
				return ra - rb
			case oka != okb:
				if oka {
					return -1
				}
				return 1
			}
			return strings.Compare(a.ID(), b.ID())
		})
		if c.req.Layout == Speaker || len(cams) > len(out) {
			cams = speakersFirst(cams, speakers, c.req.Layout == Speaker, big)
		}
		for i := range min(len(out), len(cams)) {
			out[i].track = cams[i]
		}
	}
	for i := range out {
		if t := out[i].track; t != nil {
			out[i].name = names[t.Owner()]
		}
	}
	return out
}

// speakersFirst moves the speakers' cameras to the front, in speaker
// order. In the speaker layout, when no speaker has a camera, the one
// shown large stays large.
func speakersFirst(cams []*broker.Track, speakers []string, keepBig bool, big *broker.Track) []*broker.Track {
	var front, rest []*broker.Track
	for _, sp := range speakers {
		for _, t := range cams {
			if sp != "" && t.Owner() == sp && !slices.Contains(front, t) {
				front = append(front, t)
			}
		}
	}
	if len(front) == 0 && keepBig && slices.Contains(cams, big) {
		front = append(front, big)
	}
	for _, t := range cams {
		if !slices.Contains(front, t) {
			rest = append(rest, t)
		}
	}
	return append(front, rest...)
}

// same reports whether the cells show want already (under mu).
func (c *Composite) same(want []choice) bool {
	if len(c.slots) != len(want) {
		return false
	}
	for i, w := range want {
		if c.slots[i].track != w.track || c.slots[i].name != w.name {
			return false
		}
	}
	return true
}

// apply taps the chosen cameras into their cells' feeds and writes the
// next child's SDP, names and filter graph (under mu).
func (c *Composite) apply(want []choice) {
	if len(c.slots) != len(want) {
		c.slots = make([]slot, len(want))
	}
	var streams []ffmpeg.Stream
	content := make([]Cell, len(want))
	for i, w := range want {
		sl := &c.slots[i]
		content[i] = Cell{Input: -1}
		if sl.track != w.track {
			if sl.untap != nil {
				sl.untap()
				sl.untap = nil
			}
			sl.track = nil
			if w.track != nil {
				st := ffmpeg.VideoStream(w.track, c.ports[i])
				if sl.feed != nil && sl.feed.Stream().MIME != st.MIME {
					sl.feed.Close()
					sl.feed = nil
				}
				if sl.feed == nil {
					f, err := ffmpeg.NewFeed(st, c.clock)
					if err != nil {
						c.s.o.Logger.Warn("composite: feed", "composite", c.id, "err", err)
						continue
					}
					sl.feed = f
				}
				sl.track = w.track
				sl.untap = c.room.Tap(w.track, "composite:"+c.id+":"+strconv.Itoa(i), sl.feed)
				w.track.RequestKeyframe()
			}
		}
		sl.name = w.name
		if sl.track == nil {
			continue
		}
		content[i].Input = len(streams)
		streams = append(streams, sl.feed.Stream())
		if sl.name != "" {
			f := filepath.Join(c.dir, "name"+strconv.Itoa(i)+".txt")
			if err := os.WriteFile(f, []byte(label(sl.name)), 0o640); err == nil {
				content[i].NameFile = f
			}
		}
	}
	if len(streams) > 0 {
		if err := os.WriteFile(c.sdpPath(), []byte(ffmpeg.SDP(streams...)), 0o640); err != nil {
			c.s.o.Logger.Warn("composite: SDP", "composite", c.id, "err", err)
		}
	}
	c.inputs = len(streams)
	c.graph = Graph(c.cells, content, c.req.Width, c.req.Height, c.req.FPS, c.s.font)
}

// label is a member's name as a cell shows it: one line, printable, at
// most 32 characters.
func label(name string) string {
	r := []rune(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, name))
	if len(r) > 32 {
		r = append(r[:31], '…')
	}
	return string(r)
}

func (c *Composite) sdpPath() string { return filepath.Join(c.dir, "composite.sdp") }

// args are the child's arguments for the last apply.
func (c *Composite) args() []string {
	c.mu.Lock()
	graph, inputs := c.graph, c.inputs
	c.mu.Unlock()
	a := append([]string{"-hide_banner", "-nostdin", "-loglevel", "warning"}, ffmpeg.ProgressArgs...)
	if inputs > 0 {
		a = append(a, "-protocol_whitelist", "file,udp,rtp", "-fflags", "+genpts", "-reorder_queue_size", "64",
			"-fpsprobesize", "0", "-analyzeduration", "1000000", "-probesize", "1000000", "-i", c.sdpPath())
	}
	fps := strconv.Itoa(c.req.FPS)
	a = append(a, "-filter_complex", graph, "-map", "[out]", "-r", fps,
		"-force_key_frames", "expr:gte(t,n_forced*2)")
	kbps := strconv.Itoa(max(150, c.req.Width*c.req.Height*c.req.FPS/8000)) + "k"
	switch c.req.Codec {
	case H264:
		a = append(a, "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-profile:v", "baseline",
			"-level", "3.1", "-pix_fmt", "yuv420p", "-b:v", kbps, "-maxrate", kbps, "-bufsize", kbps, "-g", strconv.Itoa(2*c.req.FPS))
	default:
		a = append(a, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", kbps,
			"-g", strconv.Itoa(2*c.req.FPS), "-error-resilient", "1", "-lag-in-frames", "0", "-auto-alt-ref", "0")
	}
	return append(a, "-f", "rtp", "-payload_type", "96",
		"rtp://127.0.0.1:"+strconv.Itoa(c.out.Port())+"?pkt_size=1200")
}

// close stops the child, the taps and the outlet.
func (c *Composite) close() {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	p, unwatch := c.proc, c.unwatch
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	if p != nil {
		p.Stop()
	}
	c.mu.Lock()
	for i := range c.slots {
		if c.slots[i].untap != nil {
			c.slots[i].untap()
		}
		if c.slots[i].feed != nil {
			c.slots[i].feed.Close()
		}
	}
	c.slots = nil
	for t, b := range c.benched {
		b.untap()
		delete(c.benched, t)
	}
	c.mu.Unlock()
	c.out.Close()
	c.outlet.Close()
	if err := os.RemoveAll(c.dir); err != nil {
		c.s.o.Logger.Warn("composite: remove directory", "dir", c.dir, "err", err)
	}
}
