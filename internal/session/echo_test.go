package session

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/floor"
)

// peer is a real UDP endpoint on 127.0.0.1.
type peer struct {
	t *testing.T
	c *net.UDPConn
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t, c}
}

func (p *peer) addr() string { return p.c.LocalAddr().String() }

func (p *peer) send(to netip.AddrPort, b []byte) {
	p.t.Helper()
	if _, err := p.c.WriteToUDPAddrPort(b, to); err != nil {
		p.t.Fatal(err)
	}
}

// next reads the next datagram, failing after 5 s.
func (p *peer) next(what string) []byte {
	p.t.Helper()
	buf := make([]byte, 2048)
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := p.c.Read(buf)
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	return buf[:n]
}

// expectNext reads the next datagram and checks it is want: the sentinel
// that shows nothing else came before it.
func (p *peer) expectNext(what string, want []byte) {
	p.t.Helper()
	if got := p.next(what); !bytes.Equal(got, want) {
		p.t.Fatalf("%s: got % x, want % x", what, got, want)
	}
}

func rtpBytes(ssrc uint32, seq uint16) []byte {
	return []byte{0x80, 0, byte(seq >> 8), byte(seq), 0, 0, 0, 1, byte(ssrc >> 24), byte(ssrc >> 16), byte(ssrc >> 8), byte(ssrc), 'x'}
}

// A member with a send link and a receive link does not hear itself: no
// echo holds per member, across its links.
func TestNoEchoPerMember(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t, filepath.Join(t.TempDir(), "c.db"))
	rtp := svc.o.Sockets.RTP.LocalAddr()
	s, _ := svc.Create(ctx, "echo")
	alice, _ := svc.Join(ctx, s.ID, "alice", floor.RoleParticipant)
	bob, _ := svc.Join(ctx, s.ID, "bob", floor.RoleParticipant)
	carol, _ := svc.Join(ctx, s.ID, "carol", floor.RoleParticipant)
	aSend, aRecv, bRecv, cSend := newPeer(t), newPeer(t), newPeer(t), newPeer(t)
	for _, l := range []NewRTPLink{
		{Remote: aSend.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true, Member: alice.ID},
		{Remote: aRecv.addr(), Kind: "audio", Direction: "recvonly", RTCPMux: true, Member: alice.ID},
		{Remote: bRecv.addr(), Kind: "audio", Direction: "recvonly", RTCPMux: true, Member: bob.ID},
		{Remote: cSend.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true, Member: carol.ID},
	} {
		if _, err := svc.AddRTPLink(ctx, s.ID, l); err != nil {
			t.Fatal(err)
		}
	}
	fromAlice := rtpBytes(0xa11ce, 1)
	aSend.send(rtp, fromAlice)
	bRecv.expectNext("bob hears alice", fromAlice)
	fromCarol := rtpBytes(0xca201, 1)
	cSend.send(rtp, fromCarol)
	aRecv.expectNext("alice's receive link: carol's packet first, never her own", fromCarol)
	bRecv.expectNext("bob hears carol", fromCarol)
}

func waitFloorDrops(t *testing.T, svc *Service, sid, link string, want uint64) {
	t.Helper()
	waitDrops(t, svc, sid, link, DropFloor, want)
}

// waitDrops polls a link's drop counter until it is want.
func waitDrops(t *testing.T, svc *Service, sid, link, reason string, want uint64) {
	t.Helper()
	var last string
	for range 5000 {
		got, _ := svc.Get(context.Background(), sid)
		for _, l := range got.Links {
			if l.ID == link {
				if l.Stats.Dropped[reason] == want {
					return
				}
				last = fmt.Sprintf("link %s dropped %v, want %s=%d", link, l.Stats.Dropped, reason, want)
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal(last)
}
