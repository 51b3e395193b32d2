package hls

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gohlslib/v2"
	"github.com/bluenviron/gohlslib/v2/pkg/codecs"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// muxer is a stream's LL-HLS muxer (gohlslib's low-latency variant:
// fMP4 segments and parts, blocking playlist reloads, preload hints) and
// what feeds it: the H.264 the ffmpeg child sends back over local RTP,
// and the session's Opus mix, each on its own timeline from one epoch.
type muxer struct {
	m      *gohlslib.Muxer
	video  *gohlslib.Track
	audio  *gohlslib.Track
	epoch  time.Time
	logger *slog.Logger

	mu sync.Mutex // the writes to m; the timelines below
	vt *timeline
	at *timeline

	rtp, rtcp *net.UDPConn
	done      chan struct{}

	// gen counts the writes to m: a playlist made at one gen stays right
	// until the next (Service.Serve keeps it).
	gen atomic.Uint64
	// Counted for tests and logs.
	frames, samples atomic.Uint64
	// firstPart is when the first access unit reached the muxer.
	firstAU atomic.Int64
}

// newMuxer starts a muxer whose segments last at least segment (a
// keyframe starts each: the child makes one every segment) and whose
// parts at least part, and binds the port pair the child sends to.
func newMuxer(segment, part time.Duration, logger *slog.Logger) (*muxer, error) {
	x := &muxer{
		video:  &gohlslib.Track{Codec: &codecs.H264{}, ClockRate: 90000},
		audio:  &gohlslib.Track{Codec: &codecs.Opus{ChannelCount: 2}, ClockRate: 48000, Name: "mix", IsDefault: true},
		epoch:  time.Now(),
		logger: logger,
		done:   make(chan struct{}),
	}
	x.vt, x.at = newTimeline(x.epoch, 90000), newTimeline(x.epoch, 48000)
	x.m = &gohlslib.Muxer{
		Tracks:             []*gohlslib.Track{x.video, x.audio},
		Variant:            gohlslib.MuxerVariantLowLatency,
		SegmentCount:       7,
		SegmentMinDuration: segment,
		PartMinDuration:    part,
		OnEncodeError: func(err error) {
			logger.Debug("hls: muxer", "err", err)
		},
	}
	if err := x.m.Start(); err != nil {
		return nil, fmt.Errorf("hls: muxer: %w", err)
	}
	if err := x.listen(); err != nil {
		x.m.Close()
		return nil, err
	}
	go x.readVideo()
	go x.drainRTCP()
	return x, nil
}

// listen binds an even port on 127.0.0.1 for the child's RTP and the odd
// one after it for its RTCP (read and dropped).
func (x *muxer) listen() error {
	for range 50 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return fmt.Errorf("hls: video socket: %w", err)
		}
		p := a.LocalAddr().(*net.UDPAddr).Port
		if p%2 != 0 {
			a.Close()
			continue
		}
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p + 1})
		if err != nil {
			a.Close()
			continue
		}
		_ = a.SetReadBuffer(1 << 20)
		x.rtp, x.rtcp = a, b
		return nil
	}
	return fmt.Errorf("hls: no free even port pair on 127.0.0.1")
}

// Port is where the child sends its H.264 (-f rtp).
func (x *muxer) Port() int { return x.rtp.LocalAddr().(*net.UDPAddr).Port }

// readVideo rebuilds the child's access units and writes them. After a
// lost packet it waits for the next keyframe (the child makes one every
// segment): a frame that refers to a lost one would show damage until
// then.
func (x *muxer) readVideo() {
	defer close(x.done)
	var d depacketizer
	buf := make([]byte, 1600)
	needKey := true
	for {
		n, err := x.rtp.Read(buf)
		if err != nil {
			return
		}
		now := time.Now()
		aus, err := d.push(buf[:n])
		if err != nil {
			needKey = true
		}
		for _, u := range aus {
			if needKey {
				if !idr(u.nalus) {
					continue
				}
				needKey = false
			}
			x.writeVideo(u, now)
		}
	}
}

// idr tells whether an access unit is a keyframe (has an IDR slice).
func idr(nalus [][]byte) bool {
	for _, n := range nalus {
		if len(n) > 0 && n[0]&0x1f == 5 {
			return true
		}
	}
	return false
}

func (x *muxer) writeVideo(u *au, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	pts, ok := x.vt.at(u.ssrc, u.ts, now)
	if !ok {
		return
	}
	if err := x.m.WriteH264(x.video, now, pts, u.nalus); err != nil {
		x.logger.Debug("hls: write video", "err", err)
		return
	}
	x.gen.Add(1)
	x.frames.Add(1)
	x.firstAU.CompareAndSwap(0, now.UnixNano())
}

// Deliver writes a packet of the session's Opus mix (a broker.Sink for a
// mixer output); it takes the caller's reference.
func (x *muxer) Deliver(pk *media.Packet, _ *broker.Track) {
	defer pk.Release()
	b := pk.Bytes()
	off, ok := media.PayloadOffset(b)
	if !ok || off >= len(b) {
		return
	}
	ts := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	ssrc := uint32(b[8])<<24 | uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	pts, ok := x.at.at(ssrc, ts, now)
	if !ok {
		return
	}
	if err := x.m.WriteOpus(x.audio, now, pts, [][]byte{append([]byte(nil), b[off:]...)}); err != nil {
		x.logger.Debug("hls: write audio", "err", err)
		return
	}
	x.gen.Add(1)
	x.samples.Add(1)
}

func (x *muxer) drainRTCP() {
	buf := make([]byte, 1500)
	for {
		if _, err := x.rtcp.Read(buf); err != nil {
			return
		}
	}
}

// close stops reading the child and ends the muxer: the requests it
// holds return.
func (x *muxer) close() {
	x.rtp.Close()
	x.rtcp.Close()
	<-x.done
	x.mu.Lock()
	x.m.Close()
	x.mu.Unlock()
}
