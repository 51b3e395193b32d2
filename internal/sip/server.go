package sip

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/sip/digest"
)

// Server is a running registrar and proxy.
type Server struct {
	o          Options
	log        *slog.Logger
	m          *metrics
	algorithms []string
	digest     *digest.Checker
	loc        *location
	conf       confCalls    // calls answered into sessions
	csubs      confSubs     // subscriptions to sessions' rosters (RFC 4575)
	ringing    atomic.Int32 // outbound calls ringing now
	regLimit   *limiter
	invLimit   *limiter
	calls      *callTable
	otherLimit *limiter
	dialogKey  []byte

	commitMu   sync.Mutex
	waiting    []waitingAnswer
	commitKick chan struct{}

	ua     *sipgo.UserAgent
	srv    *sipgo.Server
	client *sipgo.Client
	tp     *sip.TransportLayer
	parser *sip.Parser

	udp  net.PacketConn
	tcp  net.Listener
	port int
	// udpLaddr is the UDP listener's address, for sending from it.
	udpLaddr sip.Addr
	work     chan udpJob

	dateCache atomic.Pointer[cachedDate]
	tagPrefix string
	tagSeq    atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

type udpJob struct {
	data     []byte
	from     net.Addr
	inDialog bool // an ACK or BYE for stateless forwarding (stateless.go)
}

// New binds the UDP and TCP listeners, loads the stored registrations and
// starts serving.
func New(ctx context.Context, o Options) (*Server, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, fmt.Errorf("sip: metrics: %w", err)
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	s := &Server{
		o: o, log: o.Logger, m: m,
		algorithms: o.Algorithms,
		digest:     &digest.Checker{Realm: o.Domain, Nonces: digest.NewNonces(o.NonceTTL, o.NonceSlots), Accounts: o.Users},
		loc:        newLocation(o.Catalog, o.Logger, o.Now),
		regLimit:   newLimiter(o.RegisterRate),
		invLimit:   newLimiter(o.InviteRate),
		calls:      newCallTable(),
		otherLimit: newLimiter(o.RequestRate),
		commitKick: make(chan struct{}, 1),
		dialogKey:  o.DialogKey,
		parser:     sip.NewParser(),
		work:       make(chan udpJob, 4096),
		tagPrefix:  sip.GenerateTagN(8) + ".",
	}
	if len(s.dialogKey) == 0 {
		s.dialogKey = make([]byte, 32)
		if _, err := rand.Read(s.dialogKey); err != nil {
			return nil, fmt.Errorf("sip: dialog key: %w", err)
		}
	}
	if err := s.loc.load(ctx); err != nil {
		return nil, fmt.Errorf("sip: load registrations: %w", err)
	}
	m.registrations.Set(float64(s.loc.size()))
	if err := s.listen(); err != nil {
		return nil, err
	}
	sipLog := slog.New(&sipgoLogHandler{next: o.Logger.Handler(), bad: m.badMessages})
	s.ua, err = sipgo.NewUA(sipgo.WithUserAgent("convene"), sipgo.WithUserAgentHostname(o.Domain),
		sipgo.WithUserAgentParser(s.parser),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(sipLog),
			sip.WithTransportLayerReadFilter(s.readFilter)),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(sipLog),
			sip.WithTransactionLayerUnhandledResponseHandler(s.unhandledResponse)))
	if err != nil {
		s.closeListeners()
		return nil, fmt.Errorf("sip: %w", err)
	}
	s.tp = s.ua.TransportLayer()
	if s.srv, err = sipgo.NewServer(s.ua, sipgo.WithServerLogger(sipLog)); err != nil {
		s.closeListeners()
		return nil, fmt.Errorf("sip: %w", err)
	}
	if s.client, err = sipgo.NewClient(s.ua, sipgo.WithClientHostname(o.Advertise), sipgo.WithClientPort(s.port),
		sipgo.WithClientLogger(sipLog)); err != nil {
		s.closeListeners()
		return nil, fmt.Errorf("sip: %w", err)
	}
	s.routes()

	s.ctx, s.cancel = context.WithCancel(context.Background())
	for range workers {
		s.wg.Add(1)
		go s.udpWorker()
	}
	s.wg.Add(4)
	go s.commitLoop()
	go func() { defer s.wg.Done(); s.serveErr("udp", s.srv.ServeUDP(s.udp)) }()
	go func() { defer s.wg.Done(); s.serveErr("tcp", s.srv.ServeTCP(s.tcp)) }()
	go func() { defer s.wg.Done(); s.housekeeping() }()
	s.log.Info("sip started", "listen", s.Addr(), "domain", o.Domain, "advertise", o.Advertise,
		"stored_registrations", s.loc.size())
	return s, nil
}

// listen binds UDP first, then TCP on the same port (retrying if the port
// was picked by the kernel and TCP's twin is taken).
func (s *Server) listen() error {
	host, portStr, _ := net.SplitHostPort(s.o.Listen)
	port, _ := strconv.Atoi(portStr)
	var err error
	for range 20 {
		s.udp, err = net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("sip: listen udp %s: %w", s.o.Listen, err)
		}
		if uc, ok := s.udp.(*net.UDPConn); ok {
			_ = uc.SetReadBuffer(8 << 20)
			_ = uc.SetWriteBuffer(8 << 20)
		}
		ua := s.udp.LocalAddr().(*net.UDPAddr)
		s.port = ua.Port
		s.udpLaddr = sip.Addr{IP: ua.IP, Port: ua.Port}
		var tl net.Listener
		tl, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(s.port)))
		if err == nil {
			s.tcp = newCapListener(tl, s.o.TCPIdle, s.o.TCPMaxConns, s.o.TCPMaxConnsPerIP,
				func() { s.m.denied.WithLabelValues("tcp_conns").Inc() },
				func() { s.m.denied.WithLabelValues("tcp_idle").Inc() })
			return nil
		}
		s.udp.Close()
		if port != 0 {
			return fmt.Errorf("sip: listen tcp %s: %w", s.o.Listen, err)
		}
	}
	return fmt.Errorf("sip: listen tcp: %w", err)
}

func (s *Server) closeListeners() {
	if s.udp != nil {
		s.udp.Close()
	}
	if s.tcp != nil {
		s.tcp.Close()
	}
}

func (s *Server) serveErr(network string, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) && s.ctx.Err() == nil {
		s.log.Error("sip: listener stopped", "network", network, "err", err)
	}
}

// Addr returns the host:port SIP listens on (UDP and TCP).
func (s *Server) Addr() string {
	return net.JoinHostPort(s.o.Advertise, strconv.Itoa(s.port))
}

// Domain returns the SIP domain (digest realm).
func (s *Server) Domain() string { return s.o.Domain }

// Close stops the listeners and transactions, and writes the registrations
// to the catalog.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeListeners()
		var errs []error
		if err := s.ua.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.loc.flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sip: save registrations: %w", err))
		}
		s.calls.endAll(s)
		s.closeErr = errors.Join(errs...)
		s.log.Info("sip stopped")
	})
	return s.closeErr
}

// readFilter takes UDP REGISTERs, and in-dialog ACKs and BYEs routed
// through us, off sipgo's read loop: the workers handle them statelessly,
// which keeps the transaction layer (and its 32 s timer J per request) out
// of the hot path.
func (s *Server) readFilter(p sip.TransportReadProps, data []byte) ([]byte, error) {
	if p.Transport != "UDP" {
		return data, nil
	}
	job := udpJob{from: p.RemoteAddr}
	switch {
	case bytes.HasPrefix(data, []byte("REGISTER ")):
	case s.inDialogCandidate(data):
		job.inDialog = true
	default:
		return data, nil
	}
	if s.ctx.Err() != nil {
		return nil, nil
	}
	job.data = bytes.Clone(data)
	select {
	case s.work <- job:
	default:
		// Workers behind: drop, the client retransmits (RFC 3261 17.1.2).
		s.m.queueDrops.Inc()
	}
	return nil, nil
}

func (s *Server) udpWorker() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case job := <-s.work:
			if job.inDialog {
				s.handleUDPInDialog(job)
			} else {
				s.handleUDPRegister(job)
			}
		}
	}
}

func (s *Server) handleUDPRegister(job udpJob) {
	msg, err := s.parser.ParseSIP(job.data)
	if err != nil {
		s.m.badMessages.Inc()
		s.log.Debug("sip: dropping unparsable REGISTER", "from", job.from.String(), "err", err)
		return
	}
	req, ok := msg.(*sip.Request)
	if !ok {
		return
	}
	src := job.from.String()
	req.SetTransport("UDP")
	req.SetSource(src)
	if code, reason := s.check(req); code != 0 {
		s.m.badMessages.Inc()
		if req.Via() != nil && req.CSeq() != nil {
			s.writeUDP(s.reject(req, code, reason), job.from)
		}
		return
	}
	fixVia(req)
	res, seq := s.register(s.ctx, req, "udp", src)
	if seq == 0 {
		if res.StatusCode == sip.StatusOK {
			s.writeUDP(res, job.from) // authenticated: a query of its contacts
		} else {
			// Not authenticated or refused: bounded to the request's
			// size, measured as it is written, once.
			s.writeUDPBounded(req, res, job.from, len(job.data))
		}
		return
	}
	// Answered once the binding is durable, from the committer; this
	// worker goes on with the next request meanwhile.
	s.afterCommit(seq, func(err error) {
		if err != nil {
			res = s.notStored(req)
		}
		s.writeUDP(res, job.from)
	})
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeUDPBounded is writeUDP for an answer that may be at most
// maxAmplification times reqLen bytes (amplify.go).
func (s *Server) writeUDPBounded(req *sip.Request, res *sip.Response, to net.Addr, reqLen int) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	res.StringWrite(buf)
	if buf.Len() > maxAmplification*reqLen {
		buf.Reset()
		smaller(req, res, reqLen).StringWrite(buf)
	}
	if _, err := s.udp.WriteTo(buf.Bytes(), to); err != nil && s.ctx.Err() == nil {
		s.log.Debug("sip: udp write", "to", to.String(), "err", err)
	}
	if buf.Cap() <= 64<<10 {
		bufPool.Put(buf)
	}
}

func (s *Server) writeUDP(res *sip.Response, to net.Addr) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	res.StringWrite(buf)
	if _, err := s.udp.WriteTo(buf.Bytes(), to); err != nil && s.ctx.Err() == nil {
		s.log.Debug("sip: udp write", "to", to.String(), "err", err)
	}
	if buf.Cap() <= 64<<10 {
		bufPool.Put(buf)
	}
}

// check validates what every request must carry (RFC 3261 8.1.1, 8.2.1,
// 8.2.2) and returns the status to refuse it with, or 0: 505 for another
// SIP version, 400 for a missing or inconsistent Via, From, To, Call-ID or
// CSeq, 416 for a Request-URI that is not sip or sips, 483 for
// Max-Forwards 0, 420 for an extension it requires that we lack.
func (s *Server) check(req *sip.Request) (int, string) {
	if req.SipVersion != "SIP/2.0" {
		return sip.StatusVersionNotSupported, "Version Not Supported"
	}
	cseq := req.CSeq()
	if req.Via() == nil || req.From() == nil || req.To() == nil || req.CallID() == nil || cseq == nil {
		return sip.StatusBadRequest, "Bad Request (missing Via, From, To, Call-ID or CSeq)"
	}
	// sipgo upper-cases the request line's method but not CSeq's.
	if !strings.EqualFold(string(cseq.MethodName), string(req.Method)) {
		return sip.StatusBadRequest, "Bad Request (CSeq method does not match)"
	}
	if sc := strings.ToLower(req.Recipient.Scheme); sc != "sip" && sc != "sips" {
		return statusUnsupportedURIScheme, "Unsupported URI Scheme"
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() == 0 && !req.IsAck() &&
		!(req.Method == sip.OPTIONS && req.Recipient.User == "") {
		return sip.StatusTooManyHops, "Too Many Hops"
	}
	// We are the UAS of REGISTER and of OPTIONS to the server, and a proxy
	// for the rest (RFC 3261 8.2.2.3, 16.3 step 6).
	header := "Proxy-Require"
	if req.Method == sip.REGISTER || (req.Method == sip.OPTIONS && req.Recipient.User == "") {
		header = "Require"
	}
	if h := req.GetHeader(header); h != nil && strings.TrimSpace(h.Value()) != "" {
		return sip.StatusBadExtension, "Bad Extension"
	}
	return 0, ""
}

// reject builds the response refusing req with code (see check).
func (s *Server) reject(req *sip.Request, code int, reason string) *sip.Response {
	res := sip.NewResponseFromRequest(req, code, reason, nil)
	if code == sip.StatusBadExtension {
		header := "Proxy-Require"
		if h := req.GetHeader("Require"); h != nil && req.GetHeader("Proxy-Require") == nil {
			header = "Require"
		}
		if h := req.GetHeader(header); h != nil {
			res.AppendHeader(sip.NewHeader("Unsupported", h.Value()))
		}
	}
	return res
}

// fixVia adds received and rport to the top Via (RFC 3261 18.2.1, RFC 3581
// section 4) so responses and NAT detection use the real source.
func fixVia(req *sip.Request) {
	via := req.Via()
	if via == nil {
		return
	}
	ip, port := splitHostPort(req.Source())
	if ip == "" {
		return
	}
	if via.Host != ip {
		via.Params.Add("received", ip)
	}
	if v, ok := via.Params.Get("rport"); ok && v == "" {
		via.Params.Add("rport", strconv.Itoa(port))
		via.Params.Add("received", ip)
	}
}

// housekeeping flushes registrations, expires bindings and probes contacts.
func (s *Server) housekeeping() {
	flush := time.NewTicker(s.o.FlushInterval)
	defer flush.Stop()
	var probe <-chan time.Time
	if s.o.ProbeInterval > 0 {
		t := time.NewTicker(s.o.ProbeInterval)
		defer t.Stop()
		probe = t.C
	}
	sweep := time.NewTicker(5 * time.Second)
	defer sweep.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-flush.C:
			if err := s.loc.flush(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("sip: save registrations", "err", err)
			}
		case <-sweep.C:
			now := s.o.Now()
			s.loc.expire(now)
			s.regLimit.prune(now)
			s.invLimit.prune(now)
			s.otherLimit.prune(now)
			s.m.registrations.Set(float64(s.loc.size()))
		case <-probe:
			s.probeContacts()
		}
	}
}

// sipgoLogHandler passes sipgo's log to ours, counting and demoting its
// parse failures (malformed input is routine, not an error of the node).
type sipgoLogHandler struct {
	next slog.Handler
	bad  interface{ Inc() }
}

func (h *sipgoLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l) || l >= slog.LevelError
}

func (h *sipgoLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "failed to parse" {
		h.bad.Inc()
		r.Level = slog.LevelDebug
	} else if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug // sipgo's info is chatty (unhandled retransmissions)
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *sipgoLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sipgoLogHandler{next: h.next.WithAttrs(as), bad: h.bad}
}

func (h *sipgoLogHandler) WithGroup(name string) slog.Handler {
	return &sipgoLogHandler{next: h.next.WithGroup(name), bad: h.bad}
}

// statusUnsupportedURIScheme is 416 (RFC 3261 21.4.17); sipgo names the
// code after HTTP's Range error.
const statusUnsupportedURIScheme = 416
