package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Config describes an endpoint.
type Config struct {
	// Addr is the IP the sockets bind.
	Addr netip.Addr
	// Sources are the addresses that may send; none means no one.
	Sources []netip.Prefix
	// PayloadTypes name the codecs of dynamic payload types.
	PayloadTypes PayloadTypes
	// MaxStreams caps the tracks (source address × kind); 0 means 16.
	MaxStreams int
	// Room takes the tracks.
	Room    *broker.Room
	Metrics *Metrics
}

// Stats are an endpoint's counters.
type Stats struct {
	Packets, Bytes, RTCP uint64
	Streams              int
	Held                 int               // RTCP held until its stream's first RTP packet
	Dropped              map[string]uint64 // by reason, only those that happened
	Last                 time.Time         // when the last datagram was accepted (zero: none yet)
}

// Endpoint is an open port pair.
type Endpoint struct {
	cfg       Config
	rtp, rtcp *net.UDPConn
	rtpAddr   netip.AddrPort
	rtcpAddr  netip.AddrPort
	wg        sync.WaitGroup
	closeOnce sync.Once
	closed    atomic.Bool
	mu        sync.Mutex // guards sources, ssrcKind
	sources   map[sourceKey]*broker.Track
	ssrcKind  map[uint32]media.Kind
	// RTCP that came before its stream's first RTP packet (a sender's
	// first report often does), by the RTP source it belongs to; passed
	// on before that packet.
	early      map[netip.AddrPort][]*media.Packet
	nearly     int
	packets    atomic.Uint64
	bytes      atomic.Uint64
	rtcpIn     atomic.Uint64
	last       atomic.Int64 // unix nanoseconds
	dropped    [7]atomic.Uint64
	dropCounts [7]interface{ Inc() }
}

type sourceKey struct {
	from netip.AddrPort
	kind media.Kind
}

// Open binds a port pair (RTP on an even or odd free port, RTCP on the
// next one) and starts reading.
func Open(cfg Config) (*Endpoint, error) {
	if cfg.Room == nil || !cfg.Addr.IsValid() {
		return nil, errors.New("ingest: Room and Addr are required")
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 16
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	e := &Endpoint{cfg: cfg, sources: map[sourceKey]*broker.Track{}, ssrcKind: map[uint32]media.Kind{},
		early: map[netip.AddrPort][]*media.Packet{}}
	for i, r := range dropReasons {
		e.dropCounts[i] = cfg.Metrics.dropped.WithLabelValues(r)
	}
	var err error
	for range 20 {
		if e.rtp, e.rtcp, err = listenPair(cfg.Addr); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: no free port pair on %s: %w", cfg.Addr, err)
	}
	e.rtpAddr = e.rtp.LocalAddr().(*net.UDPAddr).AddrPort()
	e.rtcpAddr = e.rtcp.LocalAddr().(*net.UDPAddr).AddrPort()
	cfg.Metrics.endpoints.Inc()
	e.wg.Add(2)
	go e.read(e.rtp, false)
	go e.read(e.rtcp, true)
	return e, nil
}

func listenPair(ip netip.Addr) (rtp, rtcp *net.UDPConn, err error) {
	rtp, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		return nil, nil, err
	}
	port := rtp.LocalAddr().(*net.UDPAddr).Port
	if port == 65535 {
		rtp.Close()
		return nil, nil, errors.New("port 65535 has no RTCP port after it")
	}
	rtcp, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port+1))))
	if err != nil {
		rtp.Close()
		return nil, nil, err
	}
	return rtp, rtcp, nil
}

// RTP is the address RTP (and muxed RTCP) goes to.
func (e *Endpoint) RTP() netip.AddrPort { return e.rtpAddr }

// RTCP is the address RTCP goes to.
func (e *Endpoint) RTCP() netip.AddrPort { return e.rtcpAddr }

func (e *Endpoint) read(c *net.UDPConn, rtcpPort bool) {
	defer e.wg.Done()
	for {
		p := media.NewPacket()
		n, from, err := c.ReadFromUDPAddrPort(p.Buffer())
		if err != nil {
			p.Release()
			if e.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n == len(p.Buffer()) {
			e.drop(dropTooBig, p)
			continue
		}
		p.SetLen(n)
		e.handle(p, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), rtcpPort)
	}
}

func (e *Endpoint) allowed(a netip.Addr) bool {
	for _, s := range e.cfg.Sources {
		if s.Contains(a) {
			return true
		}
	}
	return false
}

// handle takes one datagram (RTCP if it came to the RTCP port).
func (e *Endpoint) handle(p *media.Packet, from netip.AddrPort, rtcpPort bool) {
	if !e.allowed(from.Addr()) {
		e.drop(dropSource, p)
		return
	}
	var class media.Class
	if rtcpPort {
		class = media.ClassifyRTCP(p.Bytes())
	} else {
		class = media.Classify(p.Bytes(), true)
	}
	switch class {
	case media.ClassRTP:
		e.handleRTP(p, from)
	case media.ClassRTCP:
		e.handleRTCP(p, from, rtcpPort)
	case media.ClassTruncated:
		e.drop(dropTruncated, p)
	default:
		e.drop(dropBadVersion, p)
	}
}

func (e *Endpoint) handleRTP(p *media.Packet, from netip.AddrPort) {
	b := p.Bytes()
	c, ok := e.cfg.PayloadTypes.Lookup(b[1] & 0x7f)
	if !ok {
		e.drop(dropUnknownPT, p)
		return
	}
	ssrc := binary.BigEndian.Uint32(b[8:12])
	k := sourceKey{from, c.Kind}
	e.mu.Lock()
	t := e.sources[k]
	if t == nil {
		if len(e.sources) >= e.cfg.MaxStreams {
			e.mu.Unlock()
			e.drop(dropStreams, p)
			return
		}
		var err error
		t, err = e.cfg.Room.Join(broker.Member{ID: "rtp:" + from.String() + "/" + c.Kind.String(), Kind: c.Kind,
			Sends: true, Info: c.Info})
		if err != nil { // the room is closing
			e.mu.Unlock()
			p.Release()
			return
		}
		e.sources[k] = t
		if early := e.early[from]; early != nil {
			delete(e.early, from)
			e.nearly -= len(early)
			for _, q := range early {
				e.accepted(q)
				e.rtcpIn.Add(1)
				e.cfg.Room.PublishRTCP(t.Publisher(), c.Kind, q)
			}
		}
	}
	if _, seen := e.ssrcKind[ssrc]; !seen && len(e.ssrcKind) < 4*e.cfg.MaxStreams {
		e.ssrcKind[ssrc] = c.Kind
	}
	e.mu.Unlock()
	e.accepted(p)
	t.Publish(p)
}

// maxEarly caps the RTCP packets held for streams not seen yet.
const maxEarly = 32

// handleRTCP passes RTCP on as the kind of the stream its first packet's
// SSRC (the sender's) sent, from the source whose RTP port is the RTCP
// port's (muxed) or the one below it. RTCP of a source not heard yet is
// held (maxEarly in all) until its first RTP packet.
func (e *Endpoint) handleRTCP(p *media.Packet, from netip.AddrPort, rtcpPort bool) {
	b := p.Bytes()
	if len(b) < 8 {
		e.drop(dropTruncated, p)
		return
	}
	ssrc := binary.BigEndian.Uint32(b[4:8])
	src := from
	if rtcpPort && from.Port() > 0 {
		src = netip.AddrPortFrom(from.Addr(), from.Port()-1)
	}
	e.mu.Lock()
	kind, ok := e.ssrcKind[ssrc]
	t := e.sources[sourceKey{src, kind}]
	if t == nil && rtcpPort { // a sender whose RTCP port is not RTP's + 1
		t = e.sources[sourceKey{from, kind}]
	}
	if !ok || t == nil {
		if len(e.sources) < e.cfg.MaxStreams && e.nearly < maxEarly {
			e.early[src] = append(e.early[src], p)
			e.nearly++
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		e.drop(dropRTCPUnknown, p)
		return
	}
	e.mu.Unlock()
	e.rtcpIn.Add(1)
	e.accepted(p)
	e.cfg.Room.PublishRTCP(t.Publisher(), kind, p)
}

func (e *Endpoint) accepted(p *media.Packet) {
	e.packets.Add(1)
	e.bytes.Add(uint64(p.Len()))
	e.last.Store(time.Now().UnixNano())
	e.cfg.Metrics.packets.Inc()
}

func (e *Endpoint) drop(reason int, p *media.Packet) {
	p.Release()
	e.dropped[reason].Add(1)
	e.dropCounts[reason].Inc()
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := Stats{Packets: e.packets.Load(), Bytes: e.bytes.Load(), RTCP: e.rtcpIn.Load(), Dropped: map[string]uint64{}}
	if l := e.last.Load(); l != 0 {
		s.Last = time.Unix(0, l)
	}
	e.mu.Lock()
	s.Streams, s.Held = len(e.sources), e.nearly
	e.mu.Unlock()
	for i, r := range dropReasons {
		if n := e.dropped[i].Load(); n > 0 {
			s.Dropped[r] = n
		}
	}
	return s
}

// Close closes the sockets, waits for the readers and takes the tracks
// out of the room. Idempotent.
func (e *Endpoint) Close() {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.rtp.Close()
		e.rtcp.Close()
		e.wg.Wait()
		e.mu.Lock()
		for _, t := range e.sources {
			e.cfg.Room.Leave(t.Publisher())
		}
		for src, ps := range e.early { // reports of streams that never came
			for _, p := range ps {
				e.drop(dropRTCPUnknown, p)
			}
			delete(e.early, src)
		}
		e.nearly = 0
		e.mu.Unlock()
		e.cfg.Metrics.endpoints.Dec()
	})
}
