package bridge

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

func TestBatchRoundTrip(t *testing.T) {
	var msg []byte
	pkts := [][]byte{rtp(1), {0x80, 0, 0, 2}, rtp(3)}
	for i, p := range pkts {
		msg = appendRecord(msg, uint32(10+i), media.Kind(i%2), p)
	}
	if want := 3*RecordLen + len(pkts[0]) + len(pkts[1]) + len(pkts[2]); len(msg) != want {
		t.Fatalf("batch of %d bytes, want %d", len(msg), want)
	}
	i := 0
	err := parseBatch(msg, func(n uint32, kind media.Kind, pkt []byte) {
		if n != uint32(10+i) || kind != media.Kind(i%2) || !bytes.Equal(pkt, pkts[i]) {
			t.Errorf("record %d: n %d kind %v %x", i, n, kind, pkt)
		}
		i++
	})
	if err != nil || i != 3 {
		t.Fatalf("%d records, err %v", i, err)
	}
	// A cut batch hands over the whole records and says what is wrong.
	i = 0
	if err := parseBatch(msg[:len(msg)-1], func(uint32, media.Kind, []byte) { i++ }); err != ErrShort || i != 2 {
		t.Fatalf("cut batch: %d records, err %v", i, err)
	}
	rtcp := appendEnvelope(nil, 1, media.Audio, true, "m", []byte{0x80, 201, 0, 1})
	if err := parseBatch(rtcp, func(uint32, media.Kind, []byte) { t.Error("RTCP handed over as RTP") }); err != ErrRecord {
		t.Fatalf("RTCP in a batch: %v", err)
	}
}

// FuzzBatch: a batch from another node (or anyone on NATS) never panics
// the parser, and every record it hands over lies within the message.
func FuzzBatch(f *testing.F) {
	f.Add(appendRecord(appendRecord(nil, 1, media.Audio, rtp(1)), 2, media.Video, []byte{0x80, 96, 0, 1}))
	f.Add([]byte{0x40, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{0x40, 0, 0, 0, 1, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		total := 0
		_ = parseBatch(msg, func(_ uint32, _ media.Kind, pkt []byte) {
			if len(pkt) == 0 {
				t.Fatal("empty record handed over")
			}
			total += RecordLen + len(pkt)
		})
		if total > len(msg) {
			t.Fatalf("records of %d bytes in a message of %d", total, len(msg))
		}
	})
}

// batchNodes is three nodes on one nats-server with the given window,
// each with session s_1's room spanned.
func batchNodes(t *testing.T, window time.Duration, max int) (bs []*Bridge, rs []*broker.Room) {
	srv := natsServer(t)
	for _, id := range []string{"a", "b", "c"} {
		b, err := New(Options{Node: id, Control: conn(t, srv), Audio: mediaConn(t, srv), Video: mediaConn(t, srv),
			Announce: 100 * time.Millisecond, Batch: window, MaxBatch: max})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Shutdown)
		r := broker.NewRoom("s_1")
		b.Open(r)
		bs, rs = append(bs, b), append(rs, r)
	}
	return bs, rs
}

// TestBatchesGoOnlyWhereWanted: a track's packets sent within one window
// reach the node whose member listens in fewer messages than packets, in
// order and byte for byte; the third node, with no listener, receives
// nothing at all.
func TestBatchesGoOnlyWhereWanted(t *testing.T) {
	bs, rs := batchNodes(t, 200*time.Millisecond, 0)
	tr, err := rs[0].Join(broker.Member{ID: "l_send", Kind: media.Audio, Sends: true, Owner: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	hear := &catcher{}
	testutil.WaitFor(t, 10*time.Second, "b and c to hear of a's track", func() bool {
		return remoteMembers(rs[1]) == 1 && remoteMembers(rs[2]) == 1
	})
	if _, err := rs[1].Join(broker.Member{ID: "l_hear", Kind: media.Audio, Receives: true, Sink: hear, Owner: "m2"}); err != nil {
		t.Fatal(err)
	}
	var warm uint16 = 100
	testutil.WaitFor(t, 10*time.Second, "a's packets on b", func() bool {
		warm++
		send(tr, rtp(warm))
		time.Sleep(10 * time.Millisecond)
		return hear.n() > 0
	})
	time.Sleep(500 * time.Millisecond) // the warm-up's batches arrive
	before, n0 := bs[0].Stats(), hear.n()
	const n = 40
	for i := range n {
		send(tr, rtp(1000+uint16(i)))
	}
	testutil.WaitFor(t, 10*time.Second, "40 packets on b", func() bool { return hear.n() >= n0+n })
	hear.mu.Lock()
	for i, got := range hear.got[n0:] {
		if !bytes.Equal(got, rtp(1000+uint16(i))) {
			t.Fatalf("packet %d on b is not what a's member sent (seq %d)", i, binary.BigEndian.Uint16(got[2:]))
		}
	}
	hear.mu.Unlock()
	st := bs[0].Stats()
	pkts, batches := st.PacketsOut-before.PacketsOut, st.BatchesOut-before.BatchesOut
	if pkts != n || batches == 0 || batches >= n {
		t.Errorf("a sent %d packets in %d messages: want %d in fewer", pkts, batches, n)
	}
	t.Logf("a: %d packets in %d batches, %d bytes (%d of RTP)", pkts, batches, st.BytesOut-before.BytesOut, n*len(rtp(0)))
	if c := bs[2].Stats(); c.BatchesIn != 0 || c.PacketsIn != 0 || c.BytesIn != 0 {
		t.Errorf("c, with no listener, received %+v", c)
	}
}

// TestFullBatchLeavesAtOnce: with a window far longer than the test, a
// burst that fills batches reaches the other node: a full batch does not
// wait for the window.
func TestFullBatchLeavesAtOnce(t *testing.T) {
	bs, rs := batchNodes(t, time.Hour, 2048)
	tr, err := rs[0].Join(broker.Member{ID: "l_send", Kind: media.Video, Sends: true, Owner: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b to hear of a's track", func() bool { return remoteMembers(rs[1]) == 1 })
	hear := &catcher{}
	if _, err := rs[1].Join(broker.Member{ID: "l_hear", Kind: media.Video, Receives: true, Sink: hear, Owner: "m2"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b to pull a's track", func() bool { return bs[0].Stats().Pushed == 1 })
	for i := range 100 {
		send(tr, rtp(uint16(i)))
	}
	// 100 records of 179 bytes fill 9 batches of 11 (2 KiB at most);
	// the last record may wait the hour.
	testutil.WaitFor(t, 10*time.Second, "the full batches on b", func() bool { return hear.n() >= 99 })
	// Each full batch may take the next, partial one with it.
	if st := bs[0].Stats(); st.BatchesOut > 20 || st.Dropped != 0 {
		t.Errorf("a sent %d packets in %d messages, dropped %d: want at most 20 messages", st.PacketsOut, st.BatchesOut, st.Dropped)
	}
}

// stalled is a connection whose Publish waits until released: NATS not
// keeping up. A fake: a real connection's write buffer cannot be held
// full on purpose.
type stalled struct {
	mu      sync.Mutex
	release chan struct{}
	n       int
}

func (c *stalled) Publish(string, []byte) error {
	<-c.release
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

func (c *stalled) Subscribe(string, func(string, []byte)) (func(), error) { return func() {}, nil }

// TestBatcherNeverBlocksThePublisher: while the connection is stuck, the
// packets for a node gather up to the limit, then are dropped and
// counted; the publisher goes on; when the connection comes back what was
// kept leaves.
func TestBatcherNeverBlocksThePublisher(t *testing.T) {
	c := &stalled{release: make(chan struct{})}
	b := &Bridge{o: Options{Node: "a"}}
	q := newBatcher(b, c, media.Audio, 0, 1024)
	pkt := rtp(1)
	// What may be held: MaxWaiting waiting, and as much again that the
	// goroutine took to publish when the connection stuck, each with the
	// partial batch that was being filled (1024 bytes: 5 records).
	const n = 4 * MaxWaiting / 179
	const most = 2*MaxWaiting/179 + 2*(1024/179)
	done := make(chan struct{})
	go func() {
		for range n {
			q.add(pkt, 1, media.Audio, []string{"b"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("add blocked behind a stuck connection")
	}
	if b.drop.Load() == 0 {
		t.Fatal("nothing dropped although the connection took nothing")
	}
	close(c.release)
	q.stop()
	kept := b.pktsOut.Load()
	if kept+b.drop.Load() != n || kept == 0 || kept > most {
		t.Fatalf("sent %d + dropped %d of %d (at most %d may be held)", kept, b.drop.Load(), n, most)
	}
	t.Logf("stuck connection: %d packets kept (limit %d bytes), %d dropped", kept, q.limit, b.drop.Load())
}

// TestBadBatchesFromNATS: whoever can publish on a node's subject sends it
// garbage, a cut batch, RTCP in a batch and records of tracks it does not
// pull (or from a node it does not pull from): the node counts the
// malformed messages as dropped, publishes none of it into its room, and
// the real track's packets go on arriving.
func TestBadBatchesFromNATS(t *testing.T) {
	srv := natsServer(t)
	ba, bb := newNode(t, srv, "a"), newNode(t, srv, "b")
	ra, rb := broker.NewRoom("s_1"), broker.NewRoom("s_1")
	ba.Open(ra)
	bb.Open(rb)
	tr, err := ra.Join(broker.Member{ID: "l_send", Kind: media.Audio, Sends: true, Owner: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b to hear of a's track", func() bool { return remoteMembers(rb) == 1 })
	hear := &catcher{}
	if _, err := rb.Join(broker.Member{ID: "l_hear", Kind: media.Audio, Receives: true, Sink: hear, Owner: "m2"}); err != nil {
		t.Fatal(err)
	}
	var seq uint16
	testutil.WaitFor(t, 10*time.Second, "a's packets on b", func() bool {
		seq++
		send(tr, rtp(seq))
		time.Sleep(10 * time.Millisecond)
		return hear.n() > 0
	})
	time.Sleep(300 * time.Millisecond) // the warm-up's batches arrive
	heard, dropped := hear.n(), bb.Stats().Dropped

	evil := mediaConn(t, srv)
	good := appendRecord(nil, 1, media.Audio, rtp(9999)) // a's track 1: the one b pulls
	for _, m := range []struct {
		subject string
		msg     []byte
		bad     bool
	}{
		{"convene.m.b.a.a", []byte("garbage"), true},
		{"convene.m.b.a.a", good[:len(good)-3], true},
		{"convene.m.b.a.a", appendEnvelope(nil, 1, media.Audio, true, "m1", []byte{0x80, 200, 0, 1}), true},
		{"convene.m.b.a.a", appendRecord(nil, 77, media.Audio, rtp(9999)), false}, // a track b does not pull
		{"convene.m.b.a.x", good, false},
		{"convene.m.b.v.a", good, false},                                             // audio on the video subject                                             // a node b pulls nothing from
		{"convene.m.b.a.a", appendRecord(nil, 1, media.Video, rtp(9999)), false},     // the wrong kind
		{"convene.m.b.a.a", append(appendRecord(nil, 1, media.Audio, nil), 0), true}, // an empty record
	} {
		if err := evil.Publish(m.subject, m.msg); err != nil {
			t.Fatal(err)
		}
	}
	evil.(*MediaConn).nc.Flush()
	testutil.WaitFor(t, 10*time.Second, "b to count the 4 malformed messages", func() bool { return bb.Stats().Dropped >= dropped+4 })
	for range 5 {
		seq++
		send(tr, rtp(seq))
	}
	testutil.WaitFor(t, 10*time.Second, "a's next 5 packets on b", func() bool { return hear.n() >= heard+5 })
	time.Sleep(100 * time.Millisecond)
	hear.mu.Lock()
	defer hear.mu.Unlock()
	for _, p := range hear.got[heard:] {
		if binary.BigEndian.Uint16(p[2:]) == 9999 {
			t.Fatal("an injected record reached b's listener")
		}
	}
	if got := len(hear.got) - heard; got != 5 {
		t.Fatalf("b's listener got %d packets after the bad ones, want a's 5", got)
	}
	if d := bb.Stats().Dropped - dropped; d != 4 {
		t.Errorf("b counted %d dropped messages, want the 4 malformed", d)
	}
}
