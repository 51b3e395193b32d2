package session

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/floor"
)

// A floor-controlled session stays controlled across a restart: a new
// service over the same catalog file finds the style, the holder and the
// queue; media from a non-holder is still dropped and the holder is heard.
func TestFloorStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	svc, _ := newService(t, dsn)
	s, _ := svc.Create(ctx, "floors")
	chair, _ := svc.Join(ctx, s.ID, "chair", floor.RoleChair)
	alice, _ := svc.Join(ctx, s.ID, "alice", floor.RoleParticipant)
	bob, _ := svc.Join(ctx, s.ID, "bob", floor.RoleParticipant)
	aSend, bSend, lRecv := newPeer(t), newPeer(t), newPeer(t)
	var bobLink string
	for _, l := range []NewRTPLink{
		{Remote: aSend.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true, Member: alice.ID},
		{Remote: bSend.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true, Member: bob.ID},
		{Remote: lRecv.addr(), Kind: "audio", Direction: "recvonly", RTCPMux: true, Member: chair.ID},
	} {
		v, err := svc.AddRTPLink(ctx, s.ID, l)
		if err != nil {
			t.Fatal(err)
		}
		if l.Member == bob.ID {
			bobLink = v.ID
		}
	}
	fl, _ := svc.Floors(ctx, s.ID)
	if _, err := fl.SetStyle(chair.ID, "audio", floor.Settings{Style: floor.StyleFloorControl}); err != nil {
		t.Fatal(err)
	}
	ra, err := fl.Request(alice.ID, "audio")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := fl.Grant(chair.ID, ra.ID); err != nil || r.Status != floor.Granted {
		t.Fatalf("grant: %+v %v", r, err)
	}
	rb, err := fl.Request(bob.ID, "audio")
	if err != nil || !rb.Status.Waiting() {
		t.Fatalf("bob's request: %+v %v", rb, err)
	}
	svc.Drain() // the node stops; the catalog file stays

	svc2, _ := newService(t, dsn)
	if err := svc2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc2.Drain)
	fl2, err := svc2.Floors(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := fl2.State("audio")
	if st.Style != floor.StyleFloorControl || !fl2.Holds(alice.ID, "audio") || fl2.Holds(bob.ID, "audio") {
		t.Fatalf("after restart: %+v; alice holds %v, bob holds %v", st, fl2.Holds(alice.ID, "audio"), fl2.Holds(bob.ID, "audio"))
	}
	if len(st.Queue) != 1 || st.Queue[0].ID != rb.ID || st.Queue[0].Member != bob.ID {
		t.Fatalf("queue after restart %+v, want bob's request %s", st.Queue, rb.ID)
	}
	if r, err := fl2.Request(chair.ID, "audio"); err != nil || r.ID == rb.ID || r.ID == ra.ID {
		t.Fatalf("a new request after restart: %+v %v (must not reuse an ID)", r, err)
	}

	rtp := svc2.o.Sockets.RTP.LocalAddr()
	fromBob := rtpBytes(0xb0b, 1)
	bSend.send(rtp, fromBob)
	waitFloorDrops(t, svc2, s.ID, bobLink, 1)
	fromAlice := rtpBytes(0xa11ce, 1)
	aSend.send(rtp, fromAlice)
	lRecv.expectNext("the chair hears the holder first, never the non-holder", fromAlice)

	// Bob's restored request is live: the chair can act on it.
	if r, err := fl2.Deny(chair.ID, rb.ID); err != nil || r.Status != floor.Denied {
		t.Fatalf("deny bob's restored request: %+v %v", r, err)
	}
}

// A member's (policed) link stays policed after a restart: the new service
// sends it nothing until its remote has sent first.
func TestPolicedLinkKeepsConsentAfterRestart(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	loopback := LinkPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	svc, _ := newService(t, dsn)
	svc.o.Links = loopback
	s, _ := svc.Create(ctx, "consent")
	m, _ := svc.Join(ctx, s.ID, "m", floor.RoleParticipant)
	speaker, target := newPeer(t), newPeer(t)
	if _, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: speaker.addr(), Kind: "audio", Direction: "sendonly", RTCPMux: true}); err != nil {
		t.Fatal(err)
	}
	tl, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: target.addr(), Kind: "audio", RTCPMux: true, Member: m.ID, Policed: true})
	if err != nil {
		t.Fatal(err)
	}
	svc.Drain()

	svc2, _ := newService(t, dsn)
	svc2.o.Links = loopback
	if err := svc2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc2.Drain)
	rtp := svc2.o.Sockets.RTP.LocalAddr()
	speaker.send(rtp, rtpBytes(0x5, 1))
	waitDrops(t, svc2, s.ID, tl.ID, "consent", 1)
	target.send(rtp, rtpBytes(0x7, 1))
	waitDrops(t, svc2, s.ID, tl.ID, "consent", 1) // nothing new was dropped
	var in uint64
	for range 5000 {
		got, _ := svc2.Get(ctx, s.ID)
		for _, l := range got.Links {
			if l.ID == tl.ID {
				in = l.Stats.PacketsIn
			}
		}
		if in == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	late := rtpBytes(0x5, 2)
	speaker.send(rtp, late)
	target.expectNext("the target's first datagram is the one after its consent", late)
}

// Nothing acknowledged is lost: once FloorsSaved returns (the API answers
// a primitive only then), the grant is in the catalog file, as another
// connection to it sees, without a drain: a kill -9 now would keep it.
func TestFloorChangeDurableWhenAcknowledged(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	svc, _ := newService(t, dsn)
	s, _ := svc.Create(ctx, "ack")
	alice, _ := svc.Join(ctx, s.ID, "alice", floor.RoleParticipant)
	fl, _ := svc.Floors(ctx, s.ID)
	if _, err := fl.SetStyle("", "audio", floor.Settings{Style: floor.StyleFloorControl, Auto: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := fl.Request(alice.ID, "audio"); err != nil || r.Status != floor.Granted {
		t.Fatalf("request: %+v %v", r, err)
	}
	if err := svc.FloorsSaved(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	other, err := catalog.Open(ctx, "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	states, err := other.FloorStates(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(states["audio"]), alice.ID) || !strings.Contains(string(states["audio"]), "floor_control") {
		t.Fatalf("stored audio floor after the acknowledgement: %s", states["audio"])
	}
}
