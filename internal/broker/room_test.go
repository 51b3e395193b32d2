package broker

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/convene/convene/internal/media"
)

// recorder is a Sink that keeps copies of what it gets.
type recorder struct {
	mu   sync.Mutex
	got  [][]byte
	from []string
}

func (r *recorder) Deliver(p *media.Packet, t *Track) {
	r.mu.Lock()
	r.got = append(r.got, append([]byte(nil), p.Bytes()...))
	if t != nil {
		r.from = append(r.from, t.Publisher())
	} else {
		r.from = append(r.from, "")
	}
	r.mu.Unlock()
	p.Release()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func packet(b ...byte) *media.Packet {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), b))
	return p
}

func TestRoomFanOutNoEcho(t *testing.T) {
	r := NewRoom("s1")
	recs := map[string]*recorder{}
	tracks := map[string]*Track{}
	for _, id := range []string{"a", "b", "c"} {
		rec := &recorder{}
		recs[id] = rec
		tr, err := r.Join(Member{ID: id, Kind: media.Audio, Sends: true, Receives: true, Sink: rec})
		if err != nil {
			t.Fatal(err)
		}
		tracks[id] = tr
	}
	// A video member must not get audio; a receive-only audio member must.
	vid := &recorder{}
	if _, err := r.Join(Member{ID: "v", Kind: media.Video, Sends: true, Receives: true, Sink: vid}); err != nil {
		t.Fatal(err)
	}
	listener := &recorder{}
	tr, err := r.Join(Member{ID: "l", Kind: media.Audio, Receives: true, Sink: listener})
	if err != nil || tr != nil {
		t.Fatalf("listener track %v err %v", tr, err)
	}

	tracks["a"].Publish(packet(1, 2, 3))
	tracks["b"].Publish(packet(4))
	if got := recs["a"].count(); got != 1 {
		t.Errorf("a got %d packets, want 1 (b's only)", got)
	}
	for _, f := range recs["a"].from {
		if f == "a" {
			t.Error("a received its own packet")
		}
	}
	if recs["b"].count() != 1 || recs["c"].count() != 2 || listener.count() != 2 {
		t.Errorf("counts b=%d c=%d l=%d", recs["b"].count(), recs["c"].count(), listener.count())
	}
	if vid.count() != 0 {
		t.Errorf("video member got %d audio packets", vid.count())
	}
	if string(recs["c"].got[0]) != "\x01\x02\x03" {
		t.Errorf("payload changed: %v", recs["c"].got[0])
	}
	if n, b := tracks["a"].Stats(); n != 1 || b != 3 {
		t.Errorf("track stats %d %d", n, b)
	}

	r.Leave("c")
	tracks["a"].Publish(packet(9))
	if recs["c"].count() != 2 {
		t.Error("member got packets after leaving")
	}
	if tracks["a"].Subscribers() != 2 { // b and l
		t.Errorf("subscribers %d, want 2", tracks["a"].Subscribers())
	}
	if _, err := r.Join(Member{ID: "a", Kind: media.Audio}); err != ErrMemberExists {
		t.Errorf("duplicate join err %v", err)
	}
	r.Close()
	if _, err := r.Join(Member{ID: "z", Kind: media.Audio}); err != ErrRoomClosed {
		t.Errorf("join closed room err %v", err)
	}
}

func TestLateJoinerSubscribesToExistingTracks(t *testing.T) {
	r := NewRoom("s")
	pub, _ := r.Join(Member{ID: "p", Kind: media.Video, Sends: true})
	late := &recorder{}
	if _, err := r.Join(Member{ID: "x", Kind: media.Video, Receives: true, Sink: late}); err != nil {
		t.Fatal(err)
	}
	pub.Publish(packet(7))
	if late.count() != 1 {
		t.Fatalf("late joiner got %d", late.count())
	}
}

func TestRTCPFanOut(t *testing.T) {
	r := NewRoom("s")
	a, b := &recorder{}, &recorder{}
	r.Join(Member{ID: "a", Kind: media.Audio, Receives: true, Sink: a, RTCPSink: a})
	r.Join(Member{ID: "b", Kind: media.Audio, Receives: true, Sink: b, RTCPSink: b})
	r.PublishRTCP("a", media.Audio, packet(0x80, 200))
	if a.count() != 0 || b.count() != 1 {
		t.Fatalf("rtcp a=%d b=%d", a.count(), b.count())
	}
	r.Leave("b")
	r.PublishRTCP("a", media.Audio, packet(0x80, 200)) // no one left: released, no panic
}

type rtcpTap struct {
	owners []string
}

func (t *rtcpTap) DeliverRTCP(p *media.Packet, owner string) {
	t.owners = append(t.owners, owner)
	p.Release()
}

// A tap gets the room's own RTCP with its sender's owner; RTCP from
// another node reaches members (not its sender's other endpoints) but
// never a tap, so it cannot go back across.
func TestRTCPTapAndRemote(t *testing.T) {
	r := NewRoom("s")
	a, a2, b := &recorder{}, &recorder{}, &recorder{}
	r.Join(Member{ID: "a", Kind: media.Audio, Owner: "alice", RTCPSink: a})
	r.Join(Member{ID: "a2", Kind: media.Audio, Owner: "alice", RTCPSink: a2})
	r.Join(Member{ID: "b", Kind: media.Audio, RTCPSink: b})
	tap, vtap := &rtcpTap{}, &rtcpTap{}
	untap := r.TapRTCP(media.Audio, tap)
	r.TapRTCP(media.Video, vtap)
	r.PublishRTCP("a", media.Audio, packet(0x80, 200))
	r.PublishRTCP("b", media.Audio, packet(0x80, 201))
	if len(tap.owners) != 2 || tap.owners[0] != "alice" || tap.owners[1] != "" || len(vtap.owners) != 0 {
		t.Fatalf("tap got owners %q, video tap %q", tap.owners, vtap.owners)
	}
	if a.count() != 1 || a2.count() != 1 || b.count() != 1 { // b's reaches both of alice's
		t.Fatalf("local rtcp a=%d a2=%d b=%d", a.count(), a2.count(), b.count())
	}
	r.PublishRemoteRTCP("alice", media.Audio, packet(0x80, 202))
	r.PublishRemoteRTCP("", media.Audio, packet(0x80, 203))
	if a.count() != 2 || a2.count() != 2 || b.count() != 3 || len(tap.owners) != 2 {
		t.Fatalf("remote rtcp a=%d a2=%d b=%d tap=%d", a.count(), a2.count(), b.count(), len(tap.owners))
	}
	untap()
	r.PublishRTCP("b", media.Audio, packet(0x80, 204))
	if len(tap.owners) != 2 {
		t.Fatal("an untapped tap still gets RTCP")
	}
	r.Leave("a")
	r.Leave("a2")
	r.Leave("b")
	r.PublishRemoteRTCP("x", media.Audio, packet(0x80, 205)) // no one: released, no panic
}

func TestPacketRefcount(t *testing.T) {
	p := media.NewPacket()
	p.Retain(2)
	p.Release()
	p.Release()
	p.Release()
	defer func() {
		if recover() == nil {
			t.Error("over-release did not panic")
		}
	}()
	p.Release()
}

func TestBrokerRooms(t *testing.T) {
	b := New()
	r := b.Open("x")
	if b.Open("x") != r || b.Room("x") != r {
		t.Fatal("Open not idempotent")
	}
	b.Open("a")
	if rs := b.Rooms(); len(rs) != 2 || rs[0].ID() != "a" {
		t.Fatalf("rooms %v", rs)
	}
	b.Remove("x")
	if b.Room("x") != nil {
		t.Fatal("room not removed")
	}
	if _, err := r.Join(Member{ID: "m"}); err != ErrRoomClosed {
		t.Fatal("removed room still open")
	}
}

type discard struct{}

func (discard) Deliver(p *media.Packet, _ *Track) { p.Release() }

// BenchmarkPublish measures the broker's own fan-out cost; one op is one
// packet handed to every subscriber.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 100, 6000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := NewRoom("s")
			tr, _ := r.Join(Member{ID: "pub", Kind: media.Audio, Sends: true})
			for i := 0; i < n; i++ {
				r.Join(Member{ID: "sub" + strconv.Itoa(i), Kind: media.Audio, Receives: true, Sink: discard{}})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := media.NewPacket()
				p.SetLen(252)
				tr.Publish(p)
			}
		})
	}
}

func TestSubgroupRouting(t *testing.T) {
	r := NewRoom("s")
	a, b, c := &recorder{}, &recorder{}, &recorder{}
	ta, _ := r.Join(Member{ID: "a", Kind: media.Audio, Sends: true, Receives: true, Sink: a, Group: "g1"})
	tb, _ := r.Join(Member{ID: "b", Kind: media.Audio, Sends: true, Receives: true, Sink: b, Group: "g1"})
	tc, _ := r.Join(Member{ID: "c", Kind: media.Audio, Sends: true, Receives: true, Sink: c})
	ta.Publish(packet(1))
	tc.Publish(packet(2))
	if a.count() != 0 || b.count() != 1 || c.count() != 0 {
		t.Fatalf("in groups: a=%d b=%d c=%d", a.count(), b.count(), c.count())
	}
	r.SetGroup("b", "")
	ta.Publish(packet(3)) // a is alone in g1 now
	tb.Publish(packet(4)) // reaches c only
	tc.Publish(packet(5)) // reaches b only
	if a.count() != 0 || b.count() != 2 || c.count() != 1 {
		t.Fatalf("after regroup: a=%d b=%d c=%d", a.count(), b.count(), c.count())
	}
}

func TestGateDropsAndCounts(t *testing.T) {
	r := NewRoom("s")
	rec := &recorder{}
	tr, _ := r.Join(Member{ID: "p", Kind: media.Audio, Sends: true})
	r.Join(Member{ID: "l", Kind: media.Audio, Receives: true, Sink: rec})
	tr.SetGated(true)
	tr.Publish(packet(1))
	tr.Publish(packet(2))
	if rec.count() != 0 || tr.GateDrops() != 2 || !tr.Gated() {
		t.Fatalf("gated: got %d drops %d", rec.count(), tr.GateDrops())
	}
	if n, _ := tr.Stats(); n != 0 {
		t.Errorf("gated packets counted as published: %d", n)
	}
	tr.SetGated(false)
	tr.Publish(packet(3))
	if rec.count() != 1 || tr.GateDrops() != 2 {
		t.Fatalf("open: got %d drops %d", rec.count(), tr.GateDrops())
	}
}

// No echo holds per owner: a member's receive endpoint never gets the media
// or RTCP of the same member's send endpoint, whichever joined first and
// after a subgroup move; other members still do.
func TestNoEchoPerOwner(t *testing.T) {
	r := NewRoom("s")
	a2, b, a2rtcp, brtcp := &recorder{}, &recorder{}, &recorder{}, &recorder{}
	a1, err := r.Join(Member{ID: "a1", Owner: "alice", Kind: media.Audio, Sends: true, RTCPSink: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "a2", Owner: "alice", Kind: media.Audio, Receives: true, Sink: a2, RTCPSink: a2rtcp}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "b", Owner: "bob", Kind: media.Audio, Receives: true, Sink: b, RTCPSink: brtcp}); err != nil {
		t.Fatal(err)
	}
	a1.Publish(packet(1))
	r.PublishRTCP("a1", media.Audio, packet(2))
	r.SetGroup("a2", "g")
	r.SetGroup("a1", "g")
	r.SetGroup("b", "g")
	a1.Publish(packet(3))
	if a2.count() != 0 || a2rtcp.count() != 0 {
		t.Fatalf("alice's receive endpoint got %d packets and %d RTCP of her own", a2.count(), a2rtcp.count())
	}
	if b.count() != 2 || brtcp.count() != 1 {
		t.Fatalf("bob got %d packets and %d RTCP, want 2 and 1", b.count(), brtcp.count())
	}
	// Endpoints without an owner still hear each other.
	x, y := &recorder{}, &recorder{}
	xt, _ := r.Join(Member{ID: "x", Kind: media.Video, Sends: true, Receives: true, Sink: x})
	r.Join(Member{ID: "y", Kind: media.Video, Receives: true, Sink: y})
	xt.Publish(packet(4))
	if y.count() != 1 || x.count() != 0 {
		t.Fatalf("ownerless: y %d x %d", y.count(), x.count())
	}
}

// TestTapHearsOneTrack: a tap receives the packets of the one track it
// taps, whatever its group, until untapped.
func TestTapHearsOneTrack(t *testing.T) {
	r := NewRoom("s")
	a, err := r.Join(Member{ID: "a", Kind: media.Audio, Sends: true, Group: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Join(Member{ID: "b", Kind: media.Audio, Sends: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []*Track
	untap := r.Tap(a, "tap:a", SinkFunc(func(p *media.Packet, from *Track) {
		got = append(got, from)
		p.Release()
	}))
	for _, tr := range []*Track{a, b, a} {
		p := media.NewPacket()
		p.SetLen(12)
		tr.Publish(p)
	}
	untap()
	p := media.NewPacket()
	p.SetLen(12)
	a.Publish(p)
	if len(got) != 2 || got[0] != a || got[1] != a {
		t.Fatalf("the tap heard %d packets (%v), want a's 2", len(got), got)
	}
}

// Members join and leave while the track publishes (the race detector
// checks the in-place append): every packet reaches the members
// subscribed when it was published and no others, each once.
func TestSubscribeWhilePublishing(t *testing.T) {
	r := NewRoom("s")
	tr, _ := r.Join(Member{ID: "pub", Kind: media.Audio, Sends: true})
	var got [64]atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			tr.Publish(packet(0x80, 0))
		}
	}()
	for i := range got {
		n := &got[i]
		r.Join(Member{ID: fmt.Sprintf("l%d", i), Kind: media.Audio, Receives: true,
			Sink: SinkFunc(func(p *media.Packet, _ *Track) { n.Add(1); p.Release() })})
		if i%3 == 0 {
			r.Leave(fmt.Sprintf("l%d", i))
		}
	}
	<-done
	if tr.Subscribers() != 64-22 {
		t.Fatalf("%d subscribers, want %d", tr.Subscribers(), 64-22)
	}
	before := make([]int64, len(got))
	for i := range got {
		before[i] = got[i].Load()
	}
	tr.Publish(packet(0x80, 0))
	for i := range got {
		want := before[i] + 1
		if i%3 == 0 {
			want = before[i]
		}
		if got[i].Load() != want {
			t.Errorf("member %d got %d after one more packet, want %d", i, got[i].Load(), want)
		}
	}
}

// TestFromHearsOneOwner: a receiver with From hears only that owner's
// tracks, whether they were there before it or came after, and SetFrom
// changes whose; others hear everyone but themselves.
func TestFromHearsOneOwner(t *testing.T) {
	r := NewRoom("s1")
	cam, err := r.Join(Member{ID: "cam", Kind: media.Video, Sends: true, Owner: "m_cam"})
	if err != nil {
		t.Fatal(err)
	}
	phone, everyone := &recorder{}, &recorder{}
	if _, err := r.Join(Member{ID: "phone", Kind: media.Video, Sends: true, Receives: true, Sink: phone, Owner: "m_phone", From: "m_comp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Join(Member{ID: "web", Kind: media.Video, Receives: true, Sink: everyone, Owner: "m_web"}); err != nil {
		t.Fatal(err)
	}
	comp, err := r.Join(Member{ID: "comp", Kind: media.Video, Sends: true, Owner: "m_comp"})
	if err != nil {
		t.Fatal(err)
	}
	cam.Publish(packet(0x80, 1))
	comp.Publish(packet(0x80, 2))
	if phone.count() != 1 || phone.from[0] != "comp" {
		t.Errorf("the From receiver got %v, want the composite's packet alone", phone.from)
	}
	if everyone.count() != 2 {
		t.Errorf("another receiver got %d packets, want both", everyone.count())
	}
	// SetFrom moves it to another owner's tracks.
	r.SetFrom("phone", "m_cam")
	cam.Publish(packet(0x80, 3))
	comp.Publish(packet(0x80, 4))
	if phone.count() != 2 || phone.from[1] != "cam" {
		t.Errorf("after SetFrom the receiver got %v, want the camera's packet next", phone.from)
	}
}
