package api

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/session"
	"github.com/convene/convene/internal/udpmux"
)

// newPolicyServer is newTestServer with a link policy; it also returns the
// session service, whose media sockets are the node's own RTP/RTCP ports.
func newPolicyServer(t *testing.T, pol session.LinkPolicy) (*httptest.Server, *session.Service, rtplink.Sockets) {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	var socks rtplink.Sockets
	for _, p := range []**udpmux.Socket{&socks.RTP, &socks.RTCP} {
		s, err := udpmux.Listen("127.0.0.1:0", udpmux.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		*p = s
	}
	hub := events.New(events.Options{})
	svc := session.New(session.Options{Catalog: cat, Broker: broker.New(), Sockets: socks, Events: hub, Links: pol})
	t.Cleanup(svc.Drain)
	srv := httptest.NewServer(New(Options{Sessions: svc, Node: NodeInfo{ID: "n1"}, Events: hub,
		Access: &Access{Keys: auth.NewKeys(testKey), Tokens: auth.NewSigner([]byte("test-secret"), nil)}}))
	t.Cleanup(srv.Close)
	return srv, svc, socks
}

func newSessionID(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	code, s := do(t, srv, "POST", "/api/v1/sessions", "", `{"name":"links"}`)
	if code != 201 {
		t.Fatalf("create session: %d %v", code, s)
	}
	return s["id"].(string)
}

func linkBody(remote, member, extra string) string {
	return `{"remote":"` + remote + `","kind":"audio","member":"` + member + `"` + extra + `}`
}

// A member's link to the node's own ports, the cloud metadata address,
// broadcast, multicast or loopback is refused; so is a link whose RTCP
// goes there. The operator may use loopback, never the node's own ports.
func TestLinkDestinationPolicy(t *testing.T) {
	sipPort := netip.MustParseAddrPort("127.0.0.1:15060")
	srv, svc, socks := newPolicyServer(t, session.LinkPolicy{Own: func() []netip.AddrPort {
		return []netip.AddrPort{sipPort, netip.MustParseAddrPort("0.0.0.0:18080")}
	}})
	sid := newSessionID(t, srv)
	mid, mtok := joinAs(t, srv, sid, "participant", "mallory")
	ownRTP, ownRTCP := socks.RTP.LocalAddr().String(), socks.RTCP.LocalAddr().String()
	refused := []struct{ name, body string }{
		{"node's RTP port", linkBody(ownRTP, mid, `,"rtcp_mux":true`)},
		{"node's RTCP port", linkBody(ownRTCP, mid, `,"rtcp_mux":true`)},
		{"node's SIP port", linkBody(sipPort.String(), mid, `,"rtcp_mux":true`)},
		{"a port of the node's on any address", linkBody("127.0.0.1:18080", mid, `,"rtcp_mux":true`)},
		{"cloud metadata", linkBody("169.254.169.254:80", mid, `,"rtcp_mux":true`)},
		{"limited broadcast", linkBody("255.255.255.255:5004", mid, "")},
		{"multicast", linkBody("224.0.0.251:5353", mid, "")},
		{"loopback", linkBody("127.0.0.1:5004", mid, "")},
		{"unspecified", linkBody("0.0.0.0:5004", mid, "")},
		{"IPv6 link-local", linkBody("[fe80::1]:5004", mid, "")},
		{"metadata as IPv4-mapped IPv6", linkBody("[::ffff:169.254.169.254]:80", mid, `,"rtcp_mux":true`)},
		{"metadata through NAT64", linkBody("[64:ff9b::a9fe:a9fe]:80", mid, `,"rtcp_mux":true`)},
		{"this network", linkBody("0.1.2.3:5004", mid, "")},
		{"RTCP to the metadata", linkBody("198.51.100.1:5004", mid, `,"remote_rtcp":"169.254.169.254:80"`)},
		{"RTCP (port+1) to the node's RTCP", linkBody(netip.AddrPortFrom(socks.RTCP.LocalAddr().Addr(), socks.RTCP.LocalAddr().Port()-1).String(), mid, "")},
	}
	// An address of this host other than loopback, if it has one.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				refused = append(refused, struct{ name, body string }{"this host's address " + n.IP.String(),
					linkBody(net.JoinHostPort(n.IP.String(), "5004"), mid, "")})
				break
			}
		}
	}
	for _, c := range refused {
		if code, out := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", c.body); code != 400 {
			t.Errorf("member link to %s: %d %v, want 400", c.name, code, out)
		}
	}
	// All but the unspecified address, which is not even a valid request.
	if n := svc.RefusedLinks(); n != uint64(len(refused)-1) {
		t.Errorf("refused links counted %d, want %d", n, len(refused)-1)
	}
	// The operator is trusted with loopback (local tools) but not with the
	// node's own ports: a link to itself would loop media.
	for _, own := range []string{ownRTP, sipPort.String()} {
		if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "", linkBody(own, "", `,"rtcp_mux":true`)); code != 400 {
			t.Errorf("operator link to own port %s: %d %v", own, code, out)
		}
	}
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "", linkBody("127.0.0.1:47300", "", "")); code != 201 {
		t.Errorf("operator loopback link: %d %v", code, out)
	}
	// The legitimate member link.
	if code, out := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", linkBody("198.51.100.1:5004", mid, "")); code != 201 {
		t.Errorf("member link to a public address: %d %v", code, out)
	}

	// links.allow_destinations lets members use loopback, still never the
	// node's own ports.
	srv2, _, socks2 := newPolicyServer(t, session.LinkPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	sid2 := newSessionID(t, srv2)
	mid2, mtok2 := joinAs(t, srv2, sid2, "participant", "ann")
	if code, out := doAs(t, srv2, mtok2, "POST", "/api/v1/sessions/"+sid2+"/rtp-links", linkBody("127.0.0.1:47310", mid2, "")); code != 201 {
		t.Errorf("allowed loopback member link: %d %v", code, out)
	}
	if code, out := doAs(t, srv2, mtok2, "POST", "/api/v1/sessions/"+sid2+"/rtp-links", linkBody(socks2.RTP.LocalAddr().String(), mid2, `,"rtcp_mux":true`)); code != 400 {
		t.Errorf("allowed loopback, link to the node's own RTP port: %d %v", code, out)
	}
}

// Twenty links to one target: the member's cap turns the ninth on into
// 429; a session's cap holds across its members; the operator is not
// counted against the session's cap.
func TestLinkCaps(t *testing.T) {
	srv, _, _ := newPolicyServer(t, session.LinkPolicy{MaxPerSession: 10})
	sid := newSessionID(t, srv)
	mid, mtok := joinAs(t, srv, sid, "participant", "mallory")
	created := 0
	for i := range 20 {
		code, out := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", linkBody(fmt.Sprintf("198.51.100.1:%d", 6000+2*i), mid, ""))
		switch {
		case code == 201:
			created++
		case code == 429 && errCode(out) == "limit_reached":
		default:
			t.Fatalf("link %d: %d %v", i, code, out)
		}
	}
	if created != 8 {
		t.Fatalf("%d of 20 links created, want the cap of 8", created)
	}
	mid2, mtok2 := joinAs(t, srv, sid, "participant", "mallet")
	for i := range 3 {
		code, out := doAs(t, srv, mtok2, "POST", "/api/v1/sessions/"+sid+"/rtp-links", linkBody(fmt.Sprintf("198.51.100.2:%d", 6000+2*i), mid2, ""))
		if want := []int{201, 201, 429}[i]; code != want {
			t.Fatalf("second member's link %d: %d %v, want %d (session cap 10)", i, code, out, want)
		}
	}
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "", linkBody("198.51.100.3:6000", "", "")); code != 201 {
		t.Fatalf("operator link beyond the members' cap: %d %v", code, out)
	}
}

type udpPeer struct {
	t *testing.T
	c *net.UDPConn
}

func newUDPPeer(t *testing.T) *udpPeer {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpPeer{t, c}
}

func (p *udpPeer) addr() string { return p.c.LocalAddr().String() }

func (p *udpPeer) send(to netip.AddrPort, b []byte) {
	p.t.Helper()
	if _, err := p.c.WriteToUDPAddrPort(b, to); err != nil {
		p.t.Fatal(err)
	}
}

func (p *udpPeer) expectNext(what string, want []byte) {
	p.t.Helper()
	buf := make([]byte, 2048)
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := p.c.Read(buf)
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(buf[:n], want) {
		p.t.Fatalf("%s: got % x, want % x", what, buf[:n], want)
	}
}

func rtpOf(ssrc byte, seq byte) []byte {
	return []byte{0x80, 0, 0, seq, 0, 0, 0, 1, 0, 0, 0, ssrc, 'm'}
}

// linkDrops reads a link's drop counters through the API.
func linkDrops(t *testing.T, srv *httptest.Server, sid, link string) map[string]any {
	t.Helper()
	_, s := do(t, srv, "GET", "/api/v1/sessions/"+sid, "", "")
	for _, l := range s["links"].([]any) {
		l := l.(map[string]any)
		if l["id"] == link {
			return l["stats"].(map[string]any)["dropped"].(map[string]any)
		}
	}
	t.Fatalf("no link %s", link)
	return nil
}

// A member's link to a fresh address gets nothing until that address has
// sent to the node, then gets media; an operator's link needs no consent.
func TestMemberLinkConsent(t *testing.T) {
	srv, _, socks := newPolicyServer(t, session.LinkPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	rtp := socks.RTP.LocalAddr()
	sid := newSessionID(t, srv)
	speaker, target, tool := newUDPPeer(t), newUDPPeer(t), newUDPPeer(t)
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "", linkBody(speaker.addr(), "", `,"rtcp_mux":true`)); code != 201 {
		t.Fatalf("speaker: %d %v", code, out)
	}
	if code, out := do(t, srv, "POST", "/api/v1/sessions/"+sid+"/rtp-links", "", linkBody(tool.addr(), "", `,"rtcp_mux":true,"direction":"recvonly"`)); code != 201 {
		t.Fatalf("operator's tool: %d %v", code, out)
	}
	mid, mtok := joinAs(t, srv, sid, "listener", "victim-by-proxy")
	code, l := doAs(t, srv, mtok, "POST", "/api/v1/sessions/"+sid+"/rtp-links", linkBody(target.addr(), mid, `,"rtcp_mux":true`))
	if code != 201 {
		t.Fatalf("member link: %d %v", code, l)
	}
	link := l["id"].(string)

	early := rtpOf(1, 1)
	speaker.send(rtp, early)
	tool.expectNext("the operator's link gets media at once", early)
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if linkDrops(t, srv, sid, link)["consent"] == float64(1) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("consent drops %v, want 1", linkDrops(t, srv, sid, link))
		}
	}
	// The target speaks first (a listener's RTP is dropped as direction,
	// but it is consent), then gets media.
	target.send(rtp, rtpOf(2, 1))
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if linkDrops(t, srv, sid, link)["direction"] == float64(1) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the target's packet never reached its link")
		}
	}
	late := rtpOf(1, 2)
	speaker.send(rtp, late)
	target.expectNext("target's first datagram is the one after its consent", late)
	tool.expectNext("the tool gets it too", late)
}
