package mediabench

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/bench/convene"
)

// link is the part of the API's Link the benchmark reads.
type link struct {
	ID    string `json:"id"`
	Local struct {
		Addr    string `json:"addr"`
		RTPPort int    `json:"rtp_port"`
	} `json:"local"`
}

// to is where the link's endpoint sends its RTP.
func (l link) to() (netip.AddrPort, error) {
	a, err := netip.ParseAddr(l.Local.Addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("link %s: local address %q: %w", l.ID, l.Local.Addr, err)
	}
	if a.IsUnspecified() {
		a = netip.MustParseAddr("127.0.0.1")
	}
	return netip.AddrPortFrom(a, uint16(l.Local.RTPPort)), nil
}

// cameraSession is a session of the node with cameras of this process,
// each a member ("Camera i") with a send-only video link.
type cameraSession struct {
	id    string
	cams  []*Camera
	links []link
}

// newCameraSession creates a session with n cameras playing rec.
func newCameraSession(n *convene.Node, player *Player, name string, cams int) (*cameraSession, error) {
	var s struct {
		ID string `json:"id"`
	}
	if err := n.API("POST", "/api/v1/sessions", map[string]string{"name": name}, &s); err != nil {
		return nil, err
	}
	cs := &cameraSession{id: s.ID}
	for i := range cams {
		l, cam, err := addCamera(n, s.ID, fmt.Sprintf("Camera %d", i+1), "video")
		if err != nil {
			return nil, err
		}
		to, err := l.to()
		if err != nil {
			cam.Close()
			return nil, err
		}
		cs.cams, cs.links = append(cs.cams, cam), append(cs.links, l)
		player.Add(cam, to)
	}
	return cs, nil
}

// addCamera joins a member named name and gives it a send-only link of
// kind from a new Camera's socket.
func addCamera(n *convene.Node, sid, name, kind string) (link, *Camera, error) {
	var m struct {
		Member struct {
			ID string `json:"id"`
		} `json:"member"`
	}
	if err := n.API("POST", "/api/v1/sessions/"+sid+"/members", map[string]string{"name": name, "role": "participant"}, &m); err != nil {
		return link{}, nil, err
	}
	cam, err := NewCamera()
	if err != nil {
		return link{}, nil, err
	}
	var l link
	if err := n.API("POST", "/api/v1/sessions/"+sid+"/rtp-links", map[string]any{"remote": cam.Addr(), "kind": kind,
		"direction": "sendonly", "member": m.Member.ID}, &l); err != nil {
		cam.Close()
		return link{}, nil, err
	}
	return l, cam, nil
}

// frameReader receives one composite's RTP on a socket of its own and
// times its frames (FrameClock); packets of the SSRCs in ignore (the
// session's cameras, which a receive-only link also gets) are skipped.
type frameReader struct {
	conn     *net.UDPConn
	ignore   map[uint32]bool
	inWindow atomic.Bool
	mu       sync.Mutex
	clock    FrameClock
	packets  atomic.Uint64
	done     chan struct{}
}

func newFrameReader(ignore map[uint32]bool) (*frameReader, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	_ = c.SetReadBuffer(1 << 20)
	r := &frameReader{conn: c, ignore: ignore, done: make(chan struct{})}
	go r.run()
	return r, nil
}

func (r *frameReader) addr() string { return r.conn.LocalAddr().String() }
func (r *frameReader) port() int    { return r.conn.LocalAddr().(*net.UDPAddr).Port }

func (r *frameReader) run() {
	defer close(r.done)
	buf := make([]byte, 2048)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			return
		}
		if n < 12 || buf[0]>>6 != 2 || buf[1]&0x7f >= 72 && buf[1]&0x7f <= 76 { // RTCP (RFC 5761 §4)
			continue
		}
		ssrc := uint32(buf[8])<<24 | uint32(buf[9])<<16 | uint32(buf[10])<<8 | uint32(buf[11])
		if r.ignore[ssrc] {
			continue
		}
		r.packets.Add(1)
		if buf[1]&0x80 == 0 {
			continue
		}
		ts := uint32(buf[4])<<24 | uint32(buf[5])<<16 | uint32(buf[6])<<8 | uint32(buf[7])
		at := time.Now().UnixNano()
		r.mu.Lock()
		r.clock.Frame(ts, at, r.inWindow.Load())
		r.mu.Unlock()
	}
}

// open starts a window: the counts start again, the grid stays.
func (r *frameReader) open() {
	r.mu.Lock()
	r.clock.Window()
	r.mu.Unlock()
	r.inWindow.Store(true)
}

// close ends the window and returns what it counted.
func (r *frameReader) close() FrameClock {
	r.inWindow.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clock.Window()
}

func (r *frameReader) stop() {
	r.conn.Close()
	<-r.done
}
