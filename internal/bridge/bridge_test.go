package bridge

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// natsServer starts an embedded, in-process nats-server for t.
func natsServer(t testing.TB) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func conn(t testing.TB, srv *server.Server) Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return NATS(nc)
}

// mediaConn is a media connection as nodes have them (NATSMedia).
func mediaConn(t testing.TB, srv *server.Server) Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	mc := NATSMedia(nc)
	t.Cleanup(func() { nc.Close(); mc.Close() })
	return mc
}

// newNode is one node's bridge on srv, with fast announcements.
func newNode(t testing.TB, srv *server.Server, id string) *Bridge {
	t.Helper()
	b, err := New(Options{Node: id, Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv),
		Announce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	return b
}

// twoNodes is nodes a and b on one nats-server, each with session s_1's
// room spanned.
func twoNodes(t testing.TB) (ba, bb *Bridge, ra, rb *broker.Room) {
	srv := natsServer(t)
	ba, bb = newNode(t, srv, "a"), newNode(t, srv, "b")
	ra, rb = broker.NewRoom("s_1"), broker.NewRoom("s_1")
	ba.Open(ra)
	bb.Open(rb)
	return ba, bb, ra, rb
}

// catcher keeps copies of the packets it is handed.
type catcher struct {
	mu   sync.Mutex
	got  [][]byte
	when []time.Time
}

func (c *catcher) Deliver(p *media.Packet, _ *broker.Track) {
	c.mu.Lock()
	c.got = append(c.got, append([]byte(nil), p.Bytes()...))
	c.when = append(c.when, time.Now())
	c.mu.Unlock()
	p.Release()
}

func (c *catcher) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func rtp(seq uint16) []byte {
	b := make([]byte, 12+160)
	b[0], b[1] = 0x80, 0
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*160)
	binary.BigEndian.PutUint32(b[8:], 0x1234abcd)
	for i := 12; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
	return b
}

func send(t *broker.Track, pkt []byte) {
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), pkt))
	t.Publish(p)
}

func remoteMembers(r *broker.Room) int {
	n := 0
	for _, s := range r.Senders() {
		if len(s.Track.Publisher()) > len(remotePrefix) && s.Track.Publisher()[:len(remotePrefix)] == remotePrefix {
			n++
		}
	}
	return n
}

// TestBridgeTwoNodes: member m1's track on node a reaches m2's receiver on
// node b byte for byte, once; not m1's own receiver on b (no echo across
// nodes), nor a receiver in another subgroup; and a sends nothing over
// NATS while b has no receiver for it, and stops when b's receivers go.
func TestBridgeTwoNodes(t *testing.T) {
	ba, bb, ra, rb := twoNodes(t)
	tr, err := ra.Join(broker.Member{ID: "l_send", Kind: media.Audio, Sends: true, Owner: "m1",
		Info: broker.TrackInfo{Codec: "audio/PCMU", ClockRate: 8000, Source: "rtp"}})
	if err != nil {
		t.Fatal(err)
	}
	echoA := &catcher{}
	if _, err := ra.Join(broker.Member{ID: "l_echo_a", Kind: media.Audio, Receives: true, Sink: echoA, Owner: "m1"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b to hear of a's track", func() bool { return remoteMembers(rb) == 1 })
	for i := range 20 {
		send(tr, rtp(uint16(i)))
	}
	if st := ba.Stats(); st.PacketsOut != 0 || st.Pushed != 0 {
		t.Fatalf("a sent %d packets while nobody on b listened (%+v)", st.PacketsOut, st)
	}
	if info := rb.Senders()[0].Track.Info(); info.Codec != "audio/PCMU" || info.ClockRate != 8000 || rb.Senders()[0].Track.Owner() != "m1" {
		t.Fatalf("remote track on b: %+v owner %q", info, rb.Senders()[0].Track.Owner())
	}

	hear, echoB, other := &catcher{}, &catcher{}, &catcher{}
	for _, m := range []broker.Member{
		{ID: "l_hear", Kind: media.Audio, Receives: true, Sink: hear, Owner: "m2"},
		{ID: "l_echo_b", Kind: media.Audio, Receives: true, Sink: echoB, Owner: "m1"},
		{ID: "l_other", Kind: media.Audio, Receives: true, Sink: other, Owner: "m3", Group: "g"},
	} {
		if _, err := rb.Join(m); err != nil {
			t.Fatal(err)
		}
	}
	// Sent until the pull is set up; then 50 more, each checked.
	var first uint16 = 1000
	testutil.WaitFor(t, 10*time.Second, "a's packets on b", func() bool {
		first++
		send(tr, rtp(first))
		return hear.n() > 0
	})
	for i := range 50 {
		send(tr, rtp(2000+uint16(i)))
	}
	start := -1 // the warm-up's last packets may still be on their way
	testutil.WaitFor(t, 10*time.Second, "50 packets on b", func() bool {
		hear.mu.Lock()
		defer hear.mu.Unlock()
		for i, p := range hear.got {
			if start < 0 && binary.BigEndian.Uint16(p[2:]) == 2000 {
				start = i
			}
		}
		return start >= 0 && len(hear.got) >= start+50
	})
	hear.mu.Lock()
	for i, got := range hear.got[start:] {
		if want := rtp(2000 + uint16(i)); !bytes.Equal(got, want) {
			t.Fatalf("packet %d on b differs from what a's member sent", i)
		}
	}
	hear.mu.Unlock()
	if echoB.n() != 0 || other.n() != 0 || echoA.n() != 0 {
		t.Errorf("echo on b %d, other subgroup %d, echo on a %d: want none", echoB.n(), other.n(), echoA.n())
	}
	if remoteMembers(ra) != 0 {
		t.Error("a's room has remote tracks although b sends none")
	}
	st := ba.Stats()
	t.Logf("bridge a: %+v; bytes per packet over NATS %d for %d RTP bytes (envelope %d)",
		st, st.BytesOut/st.PacketsOut, len(rtp(0)), EnvelopeLen)

	// b's receivers go: b stops pulling and a stops sending.
	for _, id := range []string{"l_hear", "l_echo_b", "l_other"} {
		rb.Leave(id)
	}
	testutil.WaitFor(t, 10*time.Second, "a to stop pushing", func() bool { return ba.Stats().Pushed == 0 && bb.Stats().Pulled == 0 })

	// a's room closes: b's remote member goes.
	ba.Close(ra)
	testutil.WaitFor(t, 10*time.Second, "b to drop a's track", func() bool { return remoteMembers(rb) == 0 })
}

// RTCP crosses: what a's endpoints send reaches b's endpoints that take
// RTCP (receiver reports back to a sender, sender reports to receivers),
// never the sender's owner's endpoints there, and never comes back.
func TestBridgeRTCP(t *testing.T) {
	ba, bb, ra, rb := twoNodes(t)
	onA, echoA := &catcher{}, &catcher{}
	onB, echoB, video := &catcher{}, &catcher{}, &catcher{}
	for _, j := range []struct {
		r *broker.Room
		m broker.Member
	}{
		{ra, broker.Member{ID: "l_a", Kind: media.Audio, Owner: "m1", RTCPSink: onA}},
		{ra, broker.Member{ID: "l_a_echo", Kind: media.Audio, Owner: "m2", RTCPSink: echoA}},
		{rb, broker.Member{ID: "l_b", Kind: media.Audio, Owner: "m2", RTCPSink: onB}},
		{rb, broker.Member{ID: "l_b_echo", Kind: media.Audio, Owner: "m1", RTCPSink: echoB}},
		{rb, broker.Member{ID: "l_b_video", Kind: media.Video, Owner: "m3", RTCPSink: video}},
	} {
		if _, err := j.r.Join(j.m); err != nil {
			t.Fatal(err)
		}
	}
	sr := func(ssrc uint32) []byte {
		b := []byte{0x80, 200, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[4:], ssrc)
		return b
	}
	rr := func(ssrc uint32) []byte {
		b := []byte{0x80, 201, 0, 1, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[4:], ssrc)
		return b
	}
	publish := func(r *broker.Room, from string, b []byte) {
		p := media.NewPacket()
		p.SetLen(copy(p.Buffer(), b))
		r.PublishRTCP(from, media.Audio, p)
	}
	// Sent until the nodes know of each other; then one of each, checked.
	testutil.WaitFor(t, 10*time.Second, "a's RTCP on b", func() bool {
		publish(ra, "l_a", sr(1))
		return onB.n() > 0
	})
	testutil.WaitFor(t, 10*time.Second, "b's RTCP on a", func() bool {
		publish(rb, "l_b", rr(2))
		return onA.n() > 0
	})
	time.Sleep(300 * time.Millisecond) // what the warm-up sent arrives
	nA, nB, nEchoA := onA.n(), onB.n(), echoA.n()
	publish(ra, "l_a", sr(3))
	publish(rb, "l_b", rr(4))
	testutil.WaitFor(t, 10*time.Second, "one more each way", func() bool { return onA.n() == nA+1 && onB.n() == nB+1 })
	time.Sleep(300 * time.Millisecond) // anything that would loop back has come
	onB.mu.Lock()
	last := onB.got[len(onB.got)-1]
	onB.mu.Unlock()
	if !bytes.Equal(last, sr(3)) {
		t.Errorf("b got %x, a's member sent %x", last, sr(3))
	}
	if onA.n() != nA+1 || onB.n() != nB+1 {
		t.Errorf("a has %d, b %d after one each way: RTCP came back across", onA.n()-nA, onB.n()-nB)
	}
	// l_a_echo (m2) hears a's own l_a locally, but not b's l_b (also m2).
	if echoA.n() != nEchoA+1 {
		t.Errorf("a's other member of m2 got %d of the 2 RTCP packets since, want only l_a's", echoA.n()-nEchoA)
	}
	// l_b_echo (m1) hears b's own l_b, but none of a's l_a (also m1).
	echoB.mu.Lock()
	for _, p := range echoB.got {
		if p[1] != 201 {
			t.Errorf("m1's endpoint on b got m1's sender report %x from a", p)
		}
	}
	echoB.mu.Unlock()
	if echoB.n() == 0 || video.n() != 0 {
		t.Errorf("m1's endpoint on b got %d receiver reports from b, video %d of audio's RTCP", echoB.n(), video.n())
	}
	if ba.Stats().PacketsOut == 0 || bb.Stats().PacketsIn == 0 {
		t.Errorf("stats a %+v b %+v", ba.Stats(), bb.Stats())
	}
}

// benchPair runs bench for a sender on node a and a receiver (sink) in
// the same room ("local") and on node b ("bridged"); bench gets a's bridge
// and the sender's track.
func benchPair(b *testing.B, sink func() broker.Sink, bench func(b *testing.B, ba *Bridge, tr *broker.Track)) {
	for _, bridged := range []bool{false, true} {
		name := "local"
		if bridged {
			name = "bridged"
		}
		b.Run(name, func(b *testing.B) {
			ba, _, ra, rb := twoNodes(b)
			tr, err := ra.Join(broker.Member{ID: "l_send", Kind: media.Audio, Sends: true, Owner: "m1"})
			if err != nil {
				b.Fatal(err)
			}
			room := ra
			if bridged {
				room = rb
				testutil.WaitFor(b, 10*time.Second, "b to hear of a's track", func() bool { return remoteMembers(rb) == 1 })
			}
			if _, err := room.Join(broker.Member{ID: "l_recv", Kind: media.Audio, Receives: true, Sink: sink(), Owner: "m2"}); err != nil {
				b.Fatal(err)
			}
			bench(b, ba, tr)
		})
	}
}

// BenchmarkHop measures a packet's trip from a track on node a to a
// receiver on node b through an in-process nats-server, one packet at a
// time (latency, not throughput), beside the same trip inside one room.
func BenchmarkHop(b *testing.B) {
	got := make(chan struct{}, 1)
	sink := func() broker.Sink {
		return broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release(); got <- struct{}{} })
	}
	benchPair(b, sink, func(b *testing.B, ba *Bridge, tr *broker.Track) {
		pkt := rtp(1)
		for { // until the pull is set up
			send(tr, pkt)
			select {
			case <-got:
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			send(tr, pkt)
			<-got
		}
		b.StopTimer()
		if st := ba.Stats(); st.PacketsOut > 0 {
			b.ReportMetric(float64(st.BytesOut)/float64(st.PacketsOut)-float64(len(pkt)), "envelope-B/pkt")
		}
	})
}

// BenchmarkThroughput is the cost of moving packets from a track on node
// a to one receiver on node b through an in-process nats-server (both
// nodes and the server in this process: ns/op is their CPU together, per
// packet), beside one receiver in the same room. The sender keeps at most
// 256 packets in flight, so the bridge's queue never drops.
func BenchmarkThroughput(b *testing.B) {
	var got atomic.Int64
	sink := func() broker.Sink {
		got.Store(0)
		return broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release(); got.Add(1) })
	}
	benchPair(b, sink, func(b *testing.B, ba *Bridge, tr *broker.Track) {
		pkt := rtp(1)
		testutil.WaitFor(b, 10*time.Second, "the first packet", func() bool { send(tr, pkt); return got.Load() > 0 })
		got.Store(0)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			for int64(i)-got.Load() > 256 {
				runtime.Gosched()
			}
			send(tr, pkt)
		}
		for got.Load() < int64(b.N) && ba.Stats().Dropped == 0 {
			runtime.Gosched()
		}
		b.StopTimer()
		if d := ba.Stats().Dropped; d > 0 {
			b.Fatalf("%d dropped", d)
		}
	})
}

// stateWatch is a nats-server, a connection on it and a count of node
// a's state messages for session s_1.
func stateWatch(t *testing.T) (*server.Server, *nats.Conn, *atomic.Int64) {
	t.Helper()
	srv := natsServer(t)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	fromA := &atomic.Int64{}
	if _, err := nc.Subscribe(stateSubject("s_1", "a"), func(*nats.Msg) { fromA.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return srv, nc, fromA
}

// A room no other node has is announced when it opens and then every
// aloneEvery intervals, not every interval; once another node has the
// session too, every interval.
func TestLoneSpanAnnouncesRarely(t *testing.T) {
	srv, _, fromA := stateWatch(t)
	announce := 50 * time.Millisecond
	newBridge := func(id string) *Bridge {
		b, err := New(Options{Node: id, Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv), Announce: announce})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Shutdown)
		return b
	}
	a := newBridge("a")
	a.Open(broker.NewRoom("s_1"))
	alone := 30 * announce // 30 intervals: the hello and about 3 more
	time.Sleep(alone)
	// Every interval would be 30; every aloneEvery about 4.
	if n := fromA.Load(); n < 1 || n > int64(alone/announce)/3 {
		t.Fatalf("a lone room was announced %d times in %v (interval %v, alone every %d)", n, alone, announce, aloneEvery)
	}
	b := newBridge("b")
	b.Open(broker.NewRoom("s_1"))
	before := fromA.Load()
	time.Sleep(alone)
	if n := fromA.Load() - before; n < 10 {
		t.Fatalf("with a peer, a announced %d times in %v (interval %v): want about every interval", n, alone, announce)
	}
}

// A span whose peer went quiet (expired: NATS restarting, a partition)
// goes on announcing every interval for a while, so the two find each
// other again as soon as messages flow.
func TestSpanThatLostItsPeerAnnouncesOften(t *testing.T) {
	srv, nc, fromA := stateWatch(t)
	announce := 50 * time.Millisecond
	a, err := New(Options{Node: "a", Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv), Announce: announce})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	a.Open(broker.NewRoom("s_1"))
	// a's hello came through: its subscriptions, sent before it, are in.
	testutil.WaitFor(t, 5*time.Second, "a's hello", func() bool { return fromA.Load() > 0 })
	// b says it has the session once, then goes quiet: a expires it
	// after Expire (3 intervals).
	hello, _ := json.Marshal(state{Node: "b", Hello: true, Tracks: []trackDesc{}})
	if err := nc.Publish(stateSubject("s_1", "b"), hello); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * announce) // expired after 3
	// Every interval, 5 take 5 intervals; every aloneEvery, 50.
	before := fromA.Load()
	testutil.WaitFor(t, 20*announce, "5 announcements after the peer expired", func() bool { return fromA.Load()-before >= 5 })
}

// plug counts holds; heldSink notes whether it was held at each delivery.
type plug struct {
	mu                    sync.Mutex
	held, holds, releases int
}

func (p *plug) Hold()    { p.mu.Lock(); p.held++; p.holds++; p.mu.Unlock() }
func (p *plug) Release() { p.mu.Lock(); p.held--; p.releases++; p.mu.Unlock() }

type heldSink struct {
	p           *plug
	mu          sync.Mutex
	got, unheld int
}

func (s *heldSink) Deliver(pk *media.Packet, _ *broker.Track) {
	s.p.mu.Lock()
	held := s.p.held > 0
	s.p.mu.Unlock()
	s.mu.Lock()
	s.got++
	if !held {
		s.unheld++
	}
	s.mu.Unlock()
	pk.Release()
}

// TestReceivedMessageUnderPlug: the packets of a message from another
// node are published with the receiving node's Plug held, once a message,
// so its senders wake once for the message's packets.
func TestReceivedMessageUnderPlug(t *testing.T) {
	srv := natsServer(t)
	ba, err := New(Options{Node: "a", Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv),
		Announce: 100 * time.Millisecond, Batch: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ba.Shutdown)
	pl := &plug{}
	bb, err := New(Options{Node: "b", Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv),
		Announce: 100 * time.Millisecond, Plug: pl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bb.Shutdown)
	ra, rb := broker.NewRoom("s_1"), broker.NewRoom("s_1")
	ba.Open(ra)
	bb.Open(rb)
	tr, err := ra.Join(broker.Member{ID: "l_send", Kind: media.Audio, Sends: true, Owner: "m1",
		Info: broker.TrackInfo{Codec: "audio/PCMU", ClockRate: 8000, Source: "rtp"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b to hear of a's track", func() bool { return remoteMembers(rb) == 1 })
	sink := &heldSink{p: pl}
	if _, err := rb.Join(broker.Member{ID: "l_hear", Kind: media.Audio, Receives: true, Sink: sink, Owner: "m2"}); err != nil {
		t.Fatal(err)
	}
	var seq uint16
	testutil.WaitFor(t, 10*time.Second, "40 packets on b", func() bool {
		for range 4 { // bursts, so that messages carry several
			seq++
			send(tr, rtp(seq))
		}
		time.Sleep(5 * time.Millisecond)
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.got >= 40
	})
	st := bb.Stats()
	testutil.WaitFor(t, 5*time.Second, "every hold released", func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return pl.held == 0
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if sink.unheld != 0 {
		t.Fatalf("%d of %d packets published without the plug held", sink.unheld, sink.got)
	}
	if st.BatchesIn >= st.PacketsIn {
		t.Fatalf("%d messages for %d packets: none carried several", st.BatchesIn, st.PacketsIn)
	}
	if uint64(pl.holds) < st.BatchesIn || pl.holds >= sink.got {
		t.Fatalf("%d holds for %d messages and %d packets: want one a message", pl.holds, st.BatchesIn, sink.got)
	}
}
