package ffmpeg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Output takes a child's RTP from a UDP port on 127.0.0.1 (RTCP, its
// sender reports, on the port after, read and dropped: the node sends its
// own) and publishes it on a track, continuous across children: one SSRC,
// sequence numbers and timestamps that run on when a new child starts.
type Output struct {
	rtp, rtcp *net.UDPConn
	track     *broker.Track
	seq       continuity
	onFrame   func()

	packets, frames atomic.Uint64 // published
	done            chan struct{}
}

// NewOutput binds an even port and the odd one after it on 127.0.0.1 and
// publishes what arrives on track; onFrame, if set, runs at the end of
// every frame (a packet with the marker bit).
func NewOutput(track *broker.Track, onFrame func()) (*Output, error) {
	for range 50 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, fmt.Errorf("ffmpeg: output socket: %w", err)
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
		r := &Output{rtp: a, rtcp: b, track: track, onFrame: onFrame, done: make(chan struct{}),
			seq: continuity{ssrc: rand.Uint32(), rate: 90000}}
		go r.run()
		go r.drain()
		return r, nil
	}
	return nil, fmt.Errorf("ffmpeg: no free even port pair on 127.0.0.1")
}

// Port is the child's RTP destination.
func (r *Output) Port() int { return r.rtp.LocalAddr().(*net.UDPAddr).Port }

func (r *Output) run() {
	defer close(r.done)
	for {
		pk := media.NewPacket()
		n, err := r.rtp.Read(pk.Buffer())
		if err != nil {
			pk.Release()
			return
		}
		pk.SetLen(n)
		b := pk.Bytes()
		if n < 12 || b[0]>>6 != 2 {
			pk.Release()
			continue
		}
		r.seq.rewrite(b, time.Now())
		r.packets.Add(1)
		if b[1]&0x80 != 0 { // the marker ends a frame (RFC 7741 §4.1, RFC 6184 §5.1)
			r.frames.Add(1)
			if r.onFrame != nil {
				r.onFrame()
			}
		}
		r.track.Publish(pk)
	}
}

// drain reads the child's RTCP: the node sends its own reports.
func (r *Output) drain() {
	buf := make([]byte, 1500)
	for {
		if _, err := r.rtcp.Read(buf); err != nil {
			return
		}
	}
}

// Close stops reading and waits for the reader goroutine.
func (r *Output) Close() {
	r.rtp.Close()
	r.rtcp.Close()
	<-r.done
}

// continuity gives the packets of a run of children one SSRC, sequence
// numbers and timestamps: a child's packets keep their own spacing; a new
// child (another SSRC) goes on at the next sequence number and at the
// timestamp the wall time since the last packet gives (RFC 3550 §5.1).
// It belongs to the reader's goroutine.
type continuity struct {
	ssrc    uint32 // ours
	rate    uint32
	in      uint32 // the running child's SSRC
	running bool
	inSeq0  uint16 // the child's first sequence number …
	inTS0   uint32 // … and timestamp
	outSeq0 uint16 // what they went out as
	outTS0  uint32
	lastSeq uint16
	lastTS  uint32
	lastAt  time.Time
}

// rewrite changes b, an RTP packet of at least 12 bytes, in place.
func (c *continuity) rewrite(b []byte, now time.Time) {
	seq, ts, ssrc := binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])
	first := !c.running
	if first || ssrc != c.in {
		c.inSeq0, c.inTS0 = seq, ts
		if first {
			c.outSeq0, c.outTS0 = uint16(rand.Uint32()), rand.Uint32()
		} else {
			gap := max(now.Sub(c.lastAt), time.Millisecond)
			c.outSeq0 = c.lastSeq + 1
			c.outTS0 = c.lastTS + uint32(gap.Seconds()*float64(c.rate))
		}
		c.in, c.running = ssrc, true
	}
	out, outTS := c.outSeq0+(seq-c.inSeq0), c.outTS0+(ts-c.inTS0)
	binary.BigEndian.PutUint16(b[2:], out)
	binary.BigEndian.PutUint32(b[4:], outTS)
	binary.BigEndian.PutUint32(b[8:], c.ssrc)
	if first || int16(out-c.lastSeq) > 0 {
		c.lastSeq, c.lastTS = out, outTS
	}
	c.lastAt = now
}

// Frames is how many frames the output published.
func (r *Output) Frames() uint64 { return r.frames.Load() }

// Packets is how many packets the output published.
func (r *Output) Packets() uint64 { return r.packets.Load() }
