package vtranscode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/supervise"
)

// Timing of a transcoder's goroutine.
const (
	// tick is how often it sends its feed's sender report and measures
	// its child's CPU.
	tick = 500 * time.Millisecond
)

// h264Fmtp is what a transcoder's H.264 says of itself: constrained
// baseline, the packetization browsers take (level 3.1; libx264 picks
// the stream's own level from its size and rate, never above the caps').
const h264Fmtp = "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"

// Transcoder is one source track in one Target, for all its receivers.
type Transcoder struct {
	h    *Hub
	id   string
	src  *broker.Track
	tgt  Target
	dir  string
	feed *ffmpeg.Feed
	out  *ffmpeg.Output
	proc *ffmpeg.Proc
	// room is the transcoder's private room: its track is the output,
	// its receivers are members that subscribe to it.
	room    *broker.Room
	track   *broker.Track
	untap   func()
	unwatch func()
	load    atomic.Uint64 // the child's CPU in millicores, smoothed
	stop    chan struct{}
	done    chan struct{}

	mu        sync.Mutex // guards n, receivers, srcPackets, idle
	n         int        // receivers' IDs
	receivers int
	// srcPackets is the source's packet count at the last status, idle
	// the statuses at which it had not moved: a child with nothing to
	// decode reports no progress, and is not hung.
	srcPackets, idle uint64
}

func newTranscoder(h *Hub, id string, room *broker.Room, src *broker.Track, c Target) (*Transcoder, error) {
	t := &Transcoder{h: h, id: id, src: src, tgt: c, dir: filepath.Join(h.o.Dir, id), room: broker.NewRoom(id),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(t.dir, 0o750); err != nil {
		return nil, fmt.Errorf("vtranscode: %w", err)
	}
	fail := func(err error) (*Transcoder, error) {
		t.release()
		return nil, err
	}
	ports, err := ffmpeg.FreePorts(1)
	if err != nil {
		return fail(err)
	}
	st := ffmpeg.VideoStream(src, ports[0])
	if err := os.WriteFile(t.sdpPath(), []byte(ffmpeg.SDP(st)), 0o640); err != nil {
		return fail(fmt.Errorf("vtranscode: %w", err))
	}
	info := broker.TrackInfo{Codec: c.Codec, ClockRate: 90000, Source: src.Info().Source, Stream: src.Info().Stream}
	if c.Codec == H264 {
		info.Fmtp = h264Fmtp
	}
	if t.track, err = t.room.Join(broker.Member{ID: "out", Kind: media.Video, Sends: true, Info: info, Keyframe: t.keyframe}); err != nil {
		return fail(err)
	}
	if t.out, err = ffmpeg.NewOutput(t.track, h.o.Metrics.frames.Inc); err != nil {
		return fail(err)
	}
	if t.feed, err = ffmpeg.NewFeed(st, ffmpeg.NewClock()); err != nil {
		return fail(err)
	}
	t.untap = room.Tap(src, "vtranscode:"+id, t.feed)
	t.proc = ffmpeg.Start(ffmpeg.ProcOptions{Name: "vtranscode " + id, Path: h.o.FFmpeg, Args: t.args,
		OnStart: t.onStart, Rekey: t.feed.AskKeyframe, Logger: h.o.Logger})
	if h.o.Supervisor != nil {
		t.unwatch = h.o.Supervisor.Add("vtranscoder", "vtranscode:"+id, t.status, t.proc.Kill)
	}
	go t.run()
	return t, nil
}

func (t *Transcoder) key() key { return key{t.src, t.tgt} }

func (t *Transcoder) sdpPath() string { return filepath.Join(t.dir, "in.sdp") }

// join adds a receiver: a member of the private room that subscribes to
// the output track (under the hub's mu).
func (t *Transcoder) join(out broker.Sink) (string, error) {
	t.mu.Lock()
	t.n++
	id := "r" + strconv.Itoa(t.n)
	t.mu.Unlock()
	if _, err := t.room.Join(broker.Member{ID: id, Kind: media.Video, Receives: true, Sink: out}); err != nil {
		return "", err
	}
	t.mu.Lock()
	t.receivers++
	t.mu.Unlock()
	// A new receiver decodes from a keyframe.
	t.src.RequestKeyframe()
	return id, nil
}

// leave takes a receiver off and returns how many are left (under the
// hub's mu).
func (t *Transcoder) leave(id string) int {
	t.room.Leave(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.receivers--
	return t.receivers
}

// keyframe asks the source's publisher for a keyframe; the child makes
// its next output frame a keyframe when it decodes one.
func (t *Transcoder) keyframe() {
	t.h.o.Metrics.keyframes.Inc()
	t.src.RequestKeyframe()
}

// onStart runs when a child starts: it decodes from a keyframe.
func (t *Transcoder) onStart() {
	t.h.o.Metrics.starts.Inc()
	t.feed.Restarted()
}

func (t *Transcoder) cores() float64 { return float64(t.load.Load()) / 1000 }

// status is the transcoder's report to the supervisor. While its source
// sends nothing (a camera muted, gated or gone quiet) ffmpeg waits on its
// input and writes no progress; every report then counts as a beat, so
// the supervisor does not kill an idle child over and over.
func (t *Transcoder) status() supervise.Status {
	p, _ := t.src.Stats()
	t.mu.Lock()
	if p == t.srcPackets {
		t.idle++
	}
	t.srcPackets = p
	n, idle := t.receivers, t.idle
	t.mu.Unlock()
	return supervise.Status{Kind: "vtranscoder", ID: "vtranscode:" + t.id, Beats: t.proc.Beats() + idle, Load: t.cores(),
		Inputs: 1, Outputs: n}
}

func (t *Transcoder) info() Info {
	t.mu.Lock()
	n := t.receivers
	t.mu.Unlock()
	return Info{ID: t.id, Source: t.src.ID(), Codec: t.tgt.Codec, Width: t.tgt.Width, Height: t.tgt.Height, FPS: t.tgt.FPS,
		Receivers: n, PID: t.proc.PID(), Starts: t.proc.Starts(), Frames: t.out.Frames(), LoadCores: t.cores()}
}

// run sends the feed's sender reports and measures the child's CPU.
func (t *Transcoder) run() {
	defer close(t.done)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	var cpu ffmpeg.CPUMeter
	for {
		select {
		case <-t.stop:
			return
		case now := <-tk.C:
			// The keyframe may have reached the child's port before
			// ffmpeg bound it, and a browser sends the next only when
			// asked.
			t.proc.CheckKeyframes(now)
			t.feed.Report(now)
			if pid := t.proc.PID(); pid != 0 {
				if cores, ok := cpu.Smooth(pid, now); ok {
					t.load.Store(uint64(cores * 1000))
				}
			}
		}
	}
}

// args are the child's arguments: decode the source, cap its rate and
// size, encode the target codec with a keyframe for every keyframe in
// (-force_key_frames source) and at least every 2×FPS frames (the GOP).
func (t *Transcoder) args() []string {
	a := append([]string{"-hide_banner", "-nostdin", "-loglevel", "warning"}, ffmpeg.ProgressArgs...)
	a = append(a, "-protocol_whitelist", "file,udp,rtp", "-fflags", "+genpts", "-reorder_queue_size", "64",
		"-fpsprobesize", "0", "-analyzeduration", "1000000", "-probesize", "1000000", "-i", t.sdpPath())
	a = append(a, EncodeArgs(t.tgt)...)
	return append(a, "-an", "-f", "rtp", "-payload_type", "96",
		"rtp://127.0.0.1:"+strconv.Itoa(t.out.Port())+"?pkt_size=1200")
}

// EncodeArgs are ffmpeg's output options for c: the filter graph, the
// rate, a keyframe out for every keyframe in, the encoder.
func EncodeArgs(c Target) []string {
	// -r with -fps_mode vfr caps the rate (a frame that rounds onto its
	// predecessor's time is dropped; a slower source loses none and none
	// is repeated) and tells the encoder the rate for its rate control.
	a := []string{"-vf", Filter(c), "-fps_mode", "vfr", "-r", strconv.Itoa(c.FPS), "-force_key_frames", "source"}
	// Constant quality under a ceiling of the class's bit rate: a source
	// smaller than its class (never scaled up) takes the bits its own
	// picture needs, not the class's.
	kbps := strconv.Itoa(max(150, c.Width*c.Height*c.FPS/8000)) + "k"
	gop := strconv.Itoa(2 * c.FPS)
	switch c.Codec {
	case H264:
		a = append(a, "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-profile:v", "baseline",
			"-pix_fmt", "yuv420p", "-crf", "26", "-maxrate", kbps, "-bufsize", kbps, "-g", gop)
	default:
		a = append(a, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-crf", "12", "-b:v", kbps,
			"-g", gop, "-error-resilient", "1", "-lag-in-frames", "0", "-auto-alt-ref", "0")
	}
	return a
}

// Filter is a transcoder's filter graph for c: scaled down to fit
// c.Width×c.Height keeping its aspect (a smaller picture is not scaled
// up), even sizes for 4:2:0. The rate cap is EncodeArgs' -r with
// -fps_mode vfr: a frame whose time rounds to its predecessor's on the
// 1/FPS grid is dropped, none is repeated.
func Filter(c Target) string {
	return "scale=w=min(iw\\," + strconv.Itoa(c.Width) + "):h=min(ih\\," + strconv.Itoa(c.Height) + ")" +
		":force_original_aspect_ratio=decrease:force_divisible_by=2,format=yuv420p"
}

// close stops the child, the tap and the output.
func (t *Transcoder) close() {
	close(t.stop)
	<-t.done
	if t.unwatch != nil {
		t.unwatch()
	}
	t.proc.Stop()
	t.release()
}

// release frees what newTranscoder made, in reverse.
func (t *Transcoder) release() {
	if t.untap != nil {
		t.untap()
	}
	if t.feed != nil {
		t.feed.Close()
	}
	if t.out != nil {
		t.out.Close()
	}
	t.room.Close()
	if err := os.RemoveAll(t.dir); err != nil {
		t.h.o.Logger.Warn("vtranscode: remove directory", "dir", t.dir, "err", err)
	}
}
