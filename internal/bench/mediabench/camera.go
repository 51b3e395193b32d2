package mediabench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/codec"
)

// Camera video: what every camera of the benchmark sends.
const (
	CameraFPS    = 15
	CameraWidth  = 320
	CameraHeight = 240
	// loopFrames is the recording's length: four seconds, a keyframe a
	// second, so the loop starts again on a keyframe.
	loopFrames = 4 * CameraFPS
	frameTicks = 90000 / CameraFPS
)

// Recording is a camera's VP8 RTP packets, encoded once by ffmpeg and
// replayed by every camera: frames[i] holds frame i's packets (RTP header
// and payload; the marker bit on the last), in order.
type Recording struct {
	frames [][][]byte
}

// RecordCamera has ffmpeg encode testsrc2 (moving, textured: a decoder
// and a scaler do real work) as VP8 RTP, 320×240 at 15 fps, a keyframe a
// second, at 300 kb/s, and keeps loopFrames frames of it.
func RecordCamera(ctx context.Context, ffmpegBin string) (*Recording, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetReadBuffer(4 << 20)
	port := c.LocalAddr().(*net.UDPAddr).Port
	cmd := exec.CommandContext(ctx, ffmpegBin, "-hide_banner", "-loglevel", "error", "-nostdin",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", CameraWidth, CameraHeight, CameraFPS),
		"-frames:v", strconv.Itoa(loopFrames+CameraFPS), "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k",
		"-g", strconv.Itoa(CameraFPS), "-keyint_min", strconv.Itoa(CameraFPS), "-f", "rtp", "-payload_type", "96",
		"rtp://127.0.0.1:"+strconv.Itoa(port)+"?pkt_size=1200")
	var out []byte
	errc := make(chan error, 1)
	go func() {
		b, err := cmd.CombinedOutput()
		out = b
		errc <- err
	}()
	rec := &Recording{}
	var frame [][]byte
	buf := make([]byte, 2048)
	for len(rec.frames) < loopFrames {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			<-errc
			return nil, fmt.Errorf("recording the camera: %d frames, %v (ffmpeg: %s)", len(rec.frames), err, out)
		}
		if n < 12 || buf[0]>>6 != 2 || buf[1]&0x7f != 96 {
			continue // RTCP
		}
		frame = append(frame, append([]byte(nil), buf[:n]...))
		if buf[1]&0x80 != 0 {
			rec.frames = append(rec.frames, frame)
			frame = nil
		}
	}
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("recording the camera: ffmpeg: %v %s", err, out)
	}
	return rec, nil
}

// Bitrate is the recording's bits a second.
func (r *Recording) Bitrate() float64 {
	n := 0
	for _, f := range r.frames {
		for _, p := range f {
			n += len(p)
		}
	}
	return float64(n*8) / (float64(len(r.frames)) / CameraFPS)
}

// Camera is one replaying sender: a socket of its own (the link's remote
// address) and its own SSRC and sequence numbers.
type Camera struct {
	conn *net.UDPConn
	to   []netip.AddrPort // where its packets go: the node's link, or a peer's input
	ssrc uint32
	seq  uint16
	ts   uint32
}

// NewCamera opens a camera's socket on 127.0.0.1.
func NewCamera() (*Camera, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteBuffer(1 << 20)
	return &Camera{conn: c, ssrc: rand.Uint32(), seq: uint16(rand.Uint32()), ts: rand.Uint32()}, nil
}

// Addr is the camera's address: a link's remote.
func (c *Camera) Addr() string { return c.conn.LocalAddr().String() }

// SSRC is the camera's SSRC.
func (c *Camera) SSRC() uint32 { return c.ssrc }

// Close closes its socket.
func (c *Camera) Close() { c.conn.Close() }

// Tone is 20 ms PCMU frames of a 440 Hz tone, replayed by an audio sender
// (the HLS session's microphone): one second, which the tone fills
// exactly.
func Tone() ([][]byte, error) {
	enc, err := codec.NewEncoder(codec.PCMU)
	if err != nil {
		return nil, err
	}
	n := codec.PCMU.FrameSamples()
	pcm := make([]int16, n)
	var frames [][]byte
	buf := make([]byte, 1500)
	for f := range 50 {
		for i := range pcm {
			t := float64(f*n+i) / float64(codec.PCMU.Rate)
			pcm[i] = int16(6000 * math.Sin(2*math.Pi*440*t))
		}
		k, err := enc.Encode(pcm, buf)
		if err != nil {
			return nil, err
		}
		frames = append(frames, append([]byte(nil), buf[:k]...))
	}
	return frames, nil
}

// Player sends every camera's recording at 15 frames a second, and the
// microphones' tone at 50 frames a second, on one schedule from one
// goroutine, until stopped. Cameras and microphones may be added while it
// plays.
type Player struct {
	rec  *Recording
	tone [][]byte

	mu   sync.Mutex
	cams []*Camera
	mics []*Camera

	stop chan struct{}
	done chan struct{}
	// SendErrors counts datagrams the kernel refused.
	sendErrs uint64
}

// NewPlayer starts playing rec (and tone, when not nil) to the cameras
// and microphones it is given.
func NewPlayer(rec *Recording, tone [][]byte) *Player {
	p := &Player{rec: rec, tone: tone, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Add makes c send the recording to every address in to.
func (p *Player) Add(c *Camera, to ...netip.AddrPort) {
	p.mu.Lock()
	c.to = append(c.to, to...)
	p.cams = append(p.cams, c)
	p.mu.Unlock()
}

// AddMic makes c send the tone to every address in to.
func (p *Player) AddMic(c *Camera, to ...netip.AddrPort) {
	p.mu.Lock()
	c.to = append(c.to, to...)
	p.mics = append(p.mics, c)
	p.mu.Unlock()
}

// SendErrors is how many datagrams could not be sent.
func (p *Player) SendErrors() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sendErrs
}

// Stop stops playing and closes every camera.
func (p *Player) Stop() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range append(p.cams, p.mics...) {
		c.Close()
	}
}

// run ticks every 20 ms (the tone's frame) and sends a video frame every
// 66.7 ms, both on an absolute schedule, so a late tick does not shift
// the rest.
func (p *Player) run() {
	defer close(p.done)
	start := time.Now()
	buf := make([]byte, 1500)
	for tick := 0; ; tick++ {
		at := start.Add(time.Duration(tick) * 20 * time.Millisecond)
		if d := time.Until(at); d > 0 {
			select {
			case <-p.stop:
				return
			case <-time.After(d):
			}
		} else {
			select {
			case <-p.stop:
				return
			default:
			}
		}
		p.mu.Lock()
		if p.tone != nil {
			payload := p.tone[tick%len(p.tone)]
			for _, c := range p.mics {
				h := buf[:12+len(payload)]
				h[0], h[1] = 0x80, codec.PCMU.PT
				if tick == 0 {
					h[1] |= 0x80
				}
				binary.BigEndian.PutUint16(h[2:], c.seq)
				binary.BigEndian.PutUint32(h[4:], c.ts)
				binary.BigEndian.PutUint32(h[8:], c.ssrc)
				copy(h[12:], payload)
				c.seq++
				c.ts += 160
				p.send(c, h)
			}
		}
		// Frame k is due at k × 1/15 s: the ticks at 0, 66.7, 133.3 ms …
		// fall on ticks 0, 3.33, 6.67: send every frame whose time came.
		for k := videoFrame(tick - 1); k < videoFrame(tick); k++ {
			frame := p.rec.frames[k%loopFrames]
			for _, c := range p.cams {
				for _, pk := range frame {
					h := buf[:len(pk)]
					copy(h, pk)
					binary.BigEndian.PutUint16(h[2:], c.seq)
					binary.BigEndian.PutUint32(h[4:], c.ts+uint32(k)*frameTicks)
					binary.BigEndian.PutUint32(h[8:], c.ssrc)
					c.seq++
					p.send(c, h)
				}
			}
		}
		p.mu.Unlock()
	}
}

// videoFrame is how many video frames are due by tick (20 ms each):
// frame k is due at k/15 s, so frames 0..t·20·15/1000 by tick t.
func videoFrame(tick int) int {
	if tick < 0 {
		return 0
	}
	return tick*20*CameraFPS/1000 + 1
}

func (p *Player) send(c *Camera, b []byte) {
	for _, to := range c.to {
		if _, err := c.conn.WriteToUDPAddrPort(b, to); err != nil && !errors.Is(err, net.ErrClosed) {
			p.sendErrs++
		}
	}
}
