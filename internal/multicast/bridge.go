package multicast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/udpmux"
	"golang.org/x/net/ipv4"
)

// DefaultQueue is the per-destination bound used when Config.Queue is not
// set: a multicast group is one destination carrying every stream of the
// session, so it needs room for bursts.
const DefaultQueue = 512

// Config describes a bridge.
type Config struct {
	// ID is the bridge's member ID in the room.
	ID   string
	Kind media.Kind
	// Group is the IPv4 multicast group and RTP port, e.g. 239.1.2.3:5004.
	// RTCP uses the next port.
	Group netip.AddrPort
	// Interface is the name of the interface to join the group on and send
	// from; "" lets the system choose by its routing table.
	Interface string
	// TTL of the datagrams sent to the group, 0..255; 0 means the default, 1.
	TTL int
	// Direction is the group's: sendrecv bridges both ways, sendonly only
	// brings the group's media into the session, recvonly only sends the
	// session's media to the group. "" means sendrecv.
	Direction media.Direction
	// Queue bounds the packets in flight to the group (udpmux.NewDest);
	// 0 means DefaultQueue.
	Queue  int
	Logger *slog.Logger
	// Subgroup, Gated and Owner place the group in the room like any other
	// link (broker.Member): the session subgroup it is in, whether its track
	// starts behind a closed floor gate, and the session member it belongs
	// to. With an owner, the group carries that member's role, subgroup and
	// floor, and never hears that member's other links.
	Subgroup string
	Gated    bool
	Owner    string
	// Info describes what the group sends (its codec), for the track.
	Info broker.TrackInfo
}

// Stats are a bridge's counters.
type Stats struct {
	PacketsIn, BytesIn uint64 // RTP accepted from the group and published
	RTCPIn             uint64 // RTCP accepted from the group and published
	Out                udpmux.DestStats
	RTCPOut            udpmux.DestStats
	Dropped            map[string]uint64 // by reason
}

// Drop reasons counted per bridge, besides media.DropTruncated and
// media.DropBadVersion.
const (
	DropLoop     = "loop"     // our own packet coming back from the group
	DropOversize = "oversize" // filled the whole buffer: may be truncated
)

// Bridge connects one room to one multicast group for one media kind.
type Bridge struct {
	cfg   Config
	room  *broker.Room
	track *broker.Track // nil unless the group sends into the session
	log   *slog.Logger
	ifi   *net.Interface // nil: system default

	recv []*recvSock // RTP (when the group sends) and RTCP

	send           *udpmux.Socket // nil unless the session sends to the group
	sendAddr       netip.AddrPort
	localIPs       map[netip.Addr]struct{} // set when sendAddr's IP is unspecified
	dest, rtcpDest *udpmux.Dest
	sent           ssrcSet

	packetsIn, bytesIn, rtcpIn            atomic.Uint64
	loop, truncated, badVersion, oversize atomic.Uint64
	readErrors                            atomic.Uint64
	closing                               atomic.Bool
	wg                                    sync.WaitGroup
	closeOnce                             sync.Once
}

type recvSock struct {
	conn  *net.UDPConn
	pc    *ipv4.PacketConn
	group *net.UDPAddr
	rtcp  bool
}

// Open joins the group and the room. The bridge's member ID is cfg.ID.
func Open(cfg Config, room *broker.Room) (*Bridge, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	b := &Bridge{cfg: cfg, room: room, log: cfg.Logger.With("bridge", cfg.ID, "group", cfg.Group.String())}
	rtcpGroup := netip.AddrPortFrom(cfg.Group.Addr(), cfg.Group.Port()+1)
	b.dest = udpmux.NewDest(cfg.Group, cfg.Queue)
	b.rtcpDest = udpmux.NewDest(rtcpGroup, cfg.Queue)

	if cfg.Interface != "" {
		ifi, err := net.InterfaceByName(cfg.Interface)
		if err != nil {
			return nil, fmt.Errorf("multicast: interface %q: %w", cfg.Interface, err)
		}
		b.ifi = ifi
	}

	ok := false
	defer func() {
		if !ok {
			b.closeSockets()
		}
	}()
	if cfg.Direction.Sends() {
		if err := b.listen(cfg.Group, false); err != nil {
			return nil, err
		}
	}
	if err := b.listen(rtcpGroup, true); err != nil {
		return nil, err
	}
	if cfg.Direction.Receives() {
		if err := b.openSend(); err != nil {
			return nil, err
		}
	}

	m := broker.Member{ID: cfg.ID, Kind: cfg.Kind, Sends: cfg.Direction.Sends(), Receives: cfg.Direction.Receives(),
		Group: cfg.Subgroup, Gated: cfg.Gated, Owner: cfg.Owner, Info: cfg.Info}
	if m.Receives {
		m.Sink = broker.SinkFunc(b.deliver)
		m.RTCPSink = broker.SinkFunc(b.deliverRTCP)
	}
	track, err := room.Join(m)
	if err != nil {
		return nil, err
	}
	b.track = track
	ok = true
	for _, r := range b.recv {
		b.wg.Add(1)
		go b.read(r)
	}
	b.log.Info("multicast bridge open", "interface", cfg.Interface, "direction", string(cfg.Direction), "ttl", cfg.TTL, "source", b.sendAddr.String())
	return b, nil
}

func validate(cfg *Config) error {
	if cfg.ID == "" {
		return errors.New("multicast: empty ID")
	}
	if cfg.Direction == "" {
		cfg.Direction = media.SendRecv
	}
	if !cfg.Direction.Valid() {
		return fmt.Errorf("multicast: invalid direction %q", cfg.Direction)
	}
	a := cfg.Group.Addr().Unmap()
	if !a.Is4() || !a.IsMulticast() {
		return fmt.Errorf("multicast: group %s is not an IPv4 multicast address", cfg.Group.Addr())
	}
	if cfg.Group.Port() == 0 || cfg.Group.Port() == 65535 {
		return fmt.Errorf("multicast: group port %d leaves no RTP and RTCP port pair", cfg.Group.Port())
	}
	cfg.Group = netip.AddrPortFrom(a, cfg.Group.Port())
	if cfg.TTL < 0 || cfg.TTL > 255 {
		return fmt.Errorf("multicast: TTL %d out of range 0..255", cfg.TTL)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 1
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// listen opens a receive socket bound to the group address and port, shared
// with other local listeners, and joins the group.
func (b *Bridge) listen(group netip.AddrPort, rtcp bool) error {
	conn, err := listenGroup(group)
	if err != nil {
		return fmt.Errorf("multicast: listen on %s: %w", group, err)
	}
	r := &recvSock{conn: conn, pc: ipv4.NewPacketConn(conn), group: &net.UDPAddr{IP: group.Addr().AsSlice()}, rtcp: rtcp}
	if err := r.pc.JoinGroup(b.ifi, r.group); err != nil {
		conn.Close()
		return fmt.Errorf("multicast: join %s on %s: %w", group.Addr(), ifName(b.ifi), err)
	}
	b.recv = append(b.recv, r)
	return nil
}

// openSend opens the socket the session's packets leave through.
func (b *Bridge) openSend() error {
	laddr := &net.UDPAddr{IP: net.IPv4zero}
	if b.ifi != nil {
		if ip := ifaceIPv4(b.ifi); ip.IsValid() {
			laddr.IP = ip.AsSlice()
		}
	}
	conn, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		return fmt.Errorf("multicast: send socket: %w", err)
	}
	pc := ipv4.NewPacketConn(conn)
	if b.ifi != nil {
		err = pc.SetMulticastInterface(b.ifi)
	}
	if err == nil {
		err = pc.SetMulticastTTL(b.cfg.TTL)
	}
	if err == nil {
		err = pc.SetMulticastLoopback(true)
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("multicast: send socket options on %s: %w", ifName(b.ifi), err)
	}
	b.sendAddr = norm(conn.LocalAddr().(*net.UDPAddr).AddrPort())
	if b.sendAddr.Addr().IsUnspecified() {
		// The kernel picks the source address per datagram; any local
		// address with our port is us.
		b.localIPs = localIPv4s()
	}
	b.send = udpmux.New(conn, udpmux.Options{Batch: true, Logger: b.cfg.Logger})
	return nil
}

func ifName(ifi *net.Interface) string {
	if ifi == nil {
		return "default interface"
	}
	return ifi.Name
}

func ifaceIPv4(ifi *net.Interface) netip.Addr {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
				return ip.Unmap()
			}
		}
	}
	return netip.Addr{}
}

func localIPv4s() map[netip.Addr]struct{} {
	m := map[netip.Addr]struct{}{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
				m[ip.Unmap()] = struct{}{}
			}
		}
	}
	return m
}

func norm(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// Track returns the bridge's track, or nil when the group does not send
// into the session (recvonly).
func (b *Bridge) Track() *broker.Track { return b.track }

// Config returns the bridge's configuration with defaults filled in.
func (b *Bridge) Config() Config { return b.cfg }

// SourceAddr returns the address the bridge sends to the group from, or the
// zero value when it does not send (sendonly).
func (b *Bridge) SourceAddr() netip.AddrPort { return b.sendAddr }

// fromUs reports whether a datagram's source is the bridge's send socket.
func (b *Bridge) fromUs(from netip.AddrPort) bool {
	if b.send == nil {
		return false
	}
	if from == b.sendAddr {
		return true
	}
	if b.localIPs == nil || from.Port() != b.sendAddr.Port() {
		return false
	}
	_, ok := b.localIPs[from.Addr()]
	return ok
}

func (b *Bridge) read(r *recvSock) {
	defer b.wg.Done()
	for {
		p := media.NewPacket()
		n, from, err := r.conn.ReadFromUDPAddrPort(p.Buffer())
		if err != nil {
			p.Release()
			if b.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			if b.readErrors.Add(1) == 1 {
				b.log.Warn("multicast read error", "err", err)
			}
			continue
		}
		if n >= media.BufSize {
			b.oversize.Add(1)
			p.Release()
			continue
		}
		p.SetLen(n)
		if b.fromUs(norm(from)) {
			b.loop.Add(1)
			p.Release()
			continue
		}
		if r.rtcp {
			b.handleRTCP(p)
		} else {
			b.handleRTP(p)
		}
	}
}

// handleRTP takes one datagram from the group's RTP port.
func (b *Bridge) handleRTP(p *media.Packet) {
	buf := p.Bytes()
	switch media.Classify(buf, false) {
	case media.ClassRTP:
		if b.sent.has(binary.BigEndian.Uint32(buf[8:12])) {
			b.loop.Add(1)
			p.Release()
			return
		}
		b.packetsIn.Add(1)
		b.bytesIn.Add(uint64(len(buf)))
		b.track.Publish(p)
	case media.ClassTruncated:
		b.truncated.Add(1)
		p.Release()
	default:
		b.badVersion.Add(1)
		p.Release()
	}
}

// handleRTCP takes one datagram from the group's RTCP port.
func (b *Bridge) handleRTCP(p *media.Packet) {
	buf := p.Bytes()
	switch media.ClassifyRTCP(buf) {
	case media.ClassRTCP:
		if len(buf) >= 8 && b.sent.has(binary.BigEndian.Uint32(buf[4:8])) {
			b.loop.Add(1)
			p.Release()
			return
		}
		b.rtcpIn.Add(1)
		b.room.PublishRTCP(b.cfg.ID, b.cfg.Kind, p)
	case media.ClassTruncated:
		b.truncated.Add(1)
		p.Release()
	default:
		b.badVersion.Add(1)
		p.Release()
	}
}

// deliver sends a packet of another member's track to the group.
func (b *Bridge) deliver(p *media.Packet, _ *broker.Track) {
	if buf := p.Bytes(); len(buf) >= 12 {
		b.sent.add(binary.BigEndian.Uint32(buf[8:12]))
	}
	b.send.Send(p, b.dest)
}

// deliverRTCP sends another member's RTCP to the group's RTCP port.
func (b *Bridge) deliverRTCP(p *media.Packet, _ *broker.Track) {
	if buf := p.Bytes(); len(buf) >= 8 {
		b.sent.add(binary.BigEndian.Uint32(buf[4:8]))
	}
	b.send.Send(p, b.rtcpDest)
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	return Stats{
		PacketsIn: b.packetsIn.Load(),
		BytesIn:   b.bytesIn.Load(),
		RTCPIn:    b.rtcpIn.Load(),
		Out:       b.dest.Stats(),
		RTCPOut:   b.rtcpDest.Stats(),
		Dropped: map[string]uint64{
			DropLoop:             b.loop.Load(),
			media.DropTruncated:  b.truncated.Load(),
			media.DropBadVersion: b.badVersion.Load(),
			DropOversize:         b.oversize.Load(),
		},
	}
}

// Close detaches the bridge: it stops reading from the group (leaving it and
// closing the receive sockets, then waiting for the readers, so nothing is
// published after Close), leaves the room, and closes the send socket after
// what is queued for the group has been sent. It is idempotent.
func (b *Bridge) Close() {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		for _, r := range b.recv {
			_ = r.pc.LeaveGroup(b.ifi, r.group)
			r.conn.Close()
		}
		b.wg.Wait()
		b.room.Leave(b.cfg.ID)
		if b.send != nil {
			b.send.Close()
		}
		b.log.Info("multicast bridge closed")
	})
}

// closeSockets undoes a failed Open.
func (b *Bridge) closeSockets() {
	for _, r := range b.recv {
		_ = r.pc.LeaveGroup(b.ifi, r.group)
		r.conn.Close()
	}
	b.recv = nil
	if b.send != nil {
		b.send.Close()
		b.send = nil
	}
}

// ssrcGen is the size of one generation of the sent-SSRC set.
const ssrcGen = 512

// ssrcSet is the set of SSRCs the bridge has sent to the group. It keeps two
// generations of at most ssrcGen entries: when the current one is full it
// becomes the previous one and the oldest is forgotten. An SSRC found only in
// the previous generation is moved back into the current one when it is sent
// again, so SSRCs in use survive and the set stays bounded at 2*ssrcGen.
type ssrcSet struct {
	mu        sync.RWMutex
	cur, prev map[uint32]struct{}
}

// add records an SSRC that is being sent. Steady state is a read lock and a
// map lookup.
func (s *ssrcSet) add(x uint32) {
	s.mu.RLock()
	_, ok := s.cur[x]
	s.mu.RUnlock()
	if ok {
		return
	}
	s.mu.Lock()
	if s.cur == nil {
		s.cur, s.prev = make(map[uint32]struct{}, ssrcGen), make(map[uint32]struct{}, ssrcGen)
	}
	if _, ok := s.cur[x]; !ok {
		if len(s.cur) >= ssrcGen {
			s.cur, s.prev = s.prev, s.cur
			clear(s.cur)
		}
		s.cur[x] = struct{}{}
	}
	s.mu.Unlock()
}

// has reports whether an SSRC was sent.
func (s *ssrcSet) has(x uint32) bool {
	s.mu.RLock()
	_, ok := s.cur[x]
	if !ok {
		_, ok = s.prev[x]
	}
	s.mu.RUnlock()
	return ok
}

func (s *ssrcSet) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.cur) + len(s.prev)
}
