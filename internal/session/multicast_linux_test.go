//go:build linux

package session

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/netnstest"
)

// groupSender sends to a multicast group from 127.0.0.1 (lo in the test's
// network namespace).
func groupSender(t *testing.T) *peer {
	return newPeer(t)
}

func randomGroup() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 77, byte(rand.IntN(256)), byte(1 + rand.IntN(254))}),
		uint16(20000+2*rand.IntN(10000)))
}

// Multicast links are links like any other: a group tied to a member
// carries that member's subgroup, and under floor_control a group that
// holds no floor is dropped. Every "nothing arrived" is shown by a
// sentinel that arrives first instead.
func TestMulticastObeysFloorAndSubgroups(t *testing.T) {
	if !netnstest.Enter(t) {
		return
	}
	ctx := context.Background()
	svc, _ := newService(t, filepath.Join(t.TempDir(), "c.db"))
	rtp := svc.o.Sockets.RTP.LocalAddr()
	s, _ := svc.Create(ctx, "mc")
	chair, _ := svc.Join(ctx, s.ID, "chair", floor.RoleChair)
	alice, _ := svc.Join(ctx, s.ID, "alice", floor.RoleParticipant)
	bob, _ := svc.Join(ctx, s.ID, "bob", floor.RoleParticipant)
	carol, _ := svc.Join(ctx, s.ID, "carol", floor.RoleParticipant)
	chairRecv, bobRecv, carolSend := newPeer(t), newPeer(t), newPeer(t)
	for _, l := range []NewRTPLink{
		{Remote: chairRecv.addr(), Kind: "audio", Direction: "recvonly", RTCPMux: true, Member: chair.ID},
		{Remote: bobRecv.addr(), Kind: "audio", Direction: "recvonly", RTCPMux: true, Member: bob.ID},
		{Remote: carolSend.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true, Member: carol.ID},
	} {
		if _, err := svc.AddRTPLink(ctx, s.ID, l); err != nil {
			t.Fatal(err)
		}
	}
	gAlice, gNone := randomGroup(), randomGroup()
	if _, err := svc.AddMulticastLink(ctx, s.ID, NewMulticastLink{Group: gAlice.String(), Kind: "audio", Direction: "sendonly",
		Interface: "lo", Member: alice.ID}); err != nil {
		t.Fatal(err)
	}
	none, err := svc.AddMulticastLink(ctx, s.ID, NewMulticastLink{Group: gNone.String(), Kind: "audio", Direction: "sendonly", Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	vic := groupSender(t)
	seq := uint16(0)
	pkt := func(ssrc uint32) []byte { seq++; return rtpBytes(ssrc, seq) }

	// Both groups flow into the session while nothing restricts them.
	p := pkt(0xa1)
	vic.send(gAlice, p)
	bobRecv.expectNext("bob hears alice's group", p)
	chairRecv.expectNext("the chair hears alice's group", p)
	p = pkt(0xe0)
	vic.send(gNone, p)
	bobRecv.expectNext("bob hears the memberless group", p)
	chairRecv.expectNext("the chair hears the memberless group", p)

	// Subgroup {alice, chair}: alice's group reaches the chair, not bob.
	g, err := svc.CreateSubgroup(ctx, s.ID, "side", chair.ID, []string{alice.ID, chair.ID})
	if err != nil {
		t.Fatal(err)
	}
	p = pkt(0xa1)
	vic.send(gAlice, p)
	chairRecv.expectNext("the chair hears alice's group in the subgroup", p)
	sentinel := pkt(0xc0)
	carolSend.send(rtp, sentinel)
	bobRecv.expectNext("bob (main session): carol's sentinel, not alice's group", sentinel)
	if err := svc.DeleteSubgroup(ctx, s.ID, g.ID); err != nil {
		t.Fatal(err)
	}

	// floor_control: the memberless group holds no floor and is dropped;
	// carol asks, is granted (auto) and is heard.
	fl, _ := svc.Floors(ctx, s.ID)
	if _, err := fl.SetStyle(chair.ID, "audio", floor.Settings{Style: floor.StyleFloorControl, Auto: true}); err != nil {
		t.Fatal(err)
	}
	dropped := pkt(0xe0)
	vic.send(gNone, dropped)
	waitFloorDrops(t, svc, s.ID, none.ID, 1)
	if r, err := fl.Request(carol.ID, "audio"); err != nil || r.Status != floor.Granted {
		t.Fatalf("carol's request: %+v %v", r, err)
	}
	sentinel = pkt(0xc0)
	carolSend.send(rtp, sentinel)
	bobRecv.expectNext("bob: carol (holder) first, never the ungated group", sentinel)
	chairRecv.expectNext("chair: carol (holder) first, never the ungated group", sentinel)
}
