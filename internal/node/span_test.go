package node

import (
	"bytes"
	"encoding/binary"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/bridge"
	"github.com/convene/convene/internal/testutil"
)

// kill stops a node without draining: it releases no lease, so the
// cluster must wait for them to expire, as after kill -9. (Unlike kill -9,
// its NATS connections still say goodbye: the bus's "stopped" event and
// the bridge's last state.)
func (c *cluster) kill(n *Node) { n.stopOnce.Do(func() { n.stopErr = n.closeAll() }) }

// arrivals reads RTP from c until it is closed, noting each packet's bytes
// and arrival time by sequence number.
type arrivals struct {
	mu   sync.Mutex
	pkts map[uint16][]byte
	at   map[uint16]time.Time
}

func arrivalsOn(c *net.UDPConn) *arrivals {
	a := &arrivals{pkts: map[uint16][]byte{}, at: map[uint16]time.Time{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			now := time.Now()
			if n < 12 {
				continue
			}
			seq := binary.BigEndian.Uint16(buf[2:])
			a.mu.Lock()
			a.pkts[seq] = append([]byte(nil), buf[:n]...)
			a.at[seq] = now
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pkts)
}

func rtpPacket(seq uint16) []byte {
	b := make([]byte, 12+160) // 20 ms of PCMU
	b[0], b[1] = 0x80, 0
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*160)
	binary.BigEndian.PutUint32(b[8:], 0x5eed0001)
	for i := 12; i < len(b); i++ {
		b[i] = byte(int(seq)*7 + i)
	}
	return b
}

// TestSessionSpansNodes: three nodes on a three-server NATS cluster and one
// PostgreSQL catalog. Member m1 sends plain RTP (a Go UDP socket) to node
// A, which owns the session; m2's receiver link on node B hears every
// packet byte for byte (same SSRC, sequence and timestamps); m1's own
// receiver on node C and m1's sending link on A hear nothing of it (no
// echo across nodes). Then node A is killed: the session's owner moves to
// B or C with the next epoch, A's links are re-homed there, and m1's
// packets sent to its link's new address reach m2 on B and m3 again. It logs the bytes a packet costs between
// nodes and the latency a node hop adds on loopback, measured against
// m3's receiver on A.
func TestSessionSpansNodes(t *testing.T) {
	c := startCluster(t, "node-a", "node-b", "node-c")
	a, b, cn := c.nodes[0], c.nodes[1], c.nodes[2]
	s := createSession(t, a, "spans nodes")
	var got sessionJSON
	m1, _ := joinMember(t, a, s.ID, "Ada")
	m2, _ := joinMember(t, b, s.ID, "Bob") // joined through a node that does not own the session
	m3, _ := joinMember(t, a, s.ID, "Cy")

	sender, rA, rB, echoC := udpConn(t), udpConn(t), udpConn(t), udpConn(t)
	addLink(t, a, s.ID, map[string]any{"remote": sender.LocalAddr().String(), "kind": "audio", "rtcp_mux": true, "member": m1})
	addLink(t, a, s.ID, map[string]any{"remote": rA.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true, "member": m3})
	addLink(t, b, s.ID, map[string]any{"remote": rB.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true, "member": m2})
	addLink(t, cn, s.ID, map[string]any{"remote": echoC.LocalAddr().String(), "kind": "audio", "direction": "recvonly", "rtcp_mux": true, "member": m1})
	atA, atB, atC, back := arrivalsOn(rA), arrivalsOn(rB), arrivalsOn(echoC), arrivalsOn(sender)

	dst, err := net.ResolveUDPAddr("udp", a.RTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	// Until B has announced its want and A pushes (no timed wait: packets
	// until one arrives).
	seq := uint16(0)
	testutil.WaitFor(t, 30*time.Second, "m1's packets on node B", func() bool {
		seq++
		if _, err := sender.WriteToUDP(rtpPacket(seq), dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		return atB.count() > 0
	})
	const n, base = 200, 10000
	for i := range n {
		if _, err := sender.WriteToUDP(rtpPacket(base+uint16(i)), dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // a paced stream, not a burst: latency, not queueing
	}
	testutil.WaitFor(t, 30*time.Second, "the 200 packets on A's and B's receivers", func() bool {
		atA.mu.Lock()
		atB.mu.Lock()
		defer atA.mu.Unlock()
		defer atB.mu.Unlock()
		for i := range n {
			if _, ok := atB.pkts[base+uint16(i)]; !ok {
				return false
			}
			if _, ok := atA.pkts[base+uint16(i)]; !ok {
				return false
			}
		}
		return true
	})
	var hop []time.Duration
	atA.mu.Lock()
	atB.mu.Lock()
	for i := range n {
		q := base + uint16(i)
		if !bytes.Equal(atB.pkts[q], rtpPacket(q)) {
			t.Fatalf("packet %d on node B is not what m1 sent to node A", q)
		}
		hop = append(hop, atB.at[q].Sub(atA.at[q]))
	}
	atB.mu.Unlock()
	atA.mu.Unlock()
	if atC.count() != 0 || back.count() != 0 {
		t.Errorf("m1 heard itself: %d packets on node C, %d back at its sender", atC.count(), back.count())
	}
	sort.Slice(hop, func(i, j int) bool { return hop[i] < hop[j] })
	st := a.bridge.Stats()
	subject := "convene.m.node-b.a.node-a"          // node A's audio batches to node B
	payload := bridge.RecordLen + len(rtpPacket(0)) // a batch of one packet
	pub := len("PUB "+subject+" "+strconv.Itoa(payload)+"\r\n") + 2
	msg := len("MSG "+subject+" 12 "+strconv.Itoa(payload)+"\r\n") + 2
	t.Logf("between nodes per packet: %d bytes of RTP + %d record (bridge: %d packets in %d messages, %d bytes out); NATS framing adds %d a message on publish, %d on delivery (subject %d bytes)",
		len(rtpPacket(0)), bridge.RecordLen, st.PacketsOut, st.BatchesOut, st.BytesOut, pub, msg, len(subject))
	t.Logf("added latency of a node hop on loopback (B's receiver minus A's, %d packets every 5 ms): median %v, p90 %v, max %v",
		n, hop[n/2], hop[n*9/10], hop[n-1])

	// Node A goes without a drain: its lease expires and B or C takes over.
	c.kill(a)
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if code := call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 {
			return "GET through B: " + strconv.Itoa(code)
		}
		if got.Owner == "node-a" || got.Owner == "" || got.OwnerEpoch < 2 {
			return "owner " + got.Owner + " epoch " + strconv.FormatInt(got.OwnerEpoch, 10)
		}
		return ""
	})
	t.Logf("after node A was killed the session is owned by %s (epoch %d)", got.Owner, got.OwnerEpoch)

	// A's links were re-homed on the new owner: m1 sends to the address
	// its link has there, and m3 (re-homed too) and m2 on B hear it.
	owner := b
	if got.Owner == cn.cfg.NodeID {
		owner = cn
	}
	var view sessionJSON
	var to *net.UDPAddr
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if code := call(t, "GET", owner.URL()+"/api/v1/sessions/"+s.ID, nil, &view); code != 200 {
			return "GET through the owner: " + strconv.Itoa(code)
		}
		for _, l := range view.Links {
			if l.Remote == sender.LocalAddr().String() {
				to = &net.UDPAddr{IP: net.ParseIP(l.Local.Addr), Port: l.Local.RTPPort}
				return ""
			}
		}
		return "m1's link is not on " + owner.cfg.NodeID
	})
	const rehomed = 20000
	testutil.WaitFor(t, 30*time.Second, "m1's packets through the new owner on B and on m3's re-homed link", func() bool {
		seq++
		if _, err := sender.WriteToUDP(rtpPacket(rehomed+seq), to); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		atA.mu.Lock()
		atB.mu.Lock()
		defer atA.mu.Unlock()
		defer atB.mu.Unlock()
		for q, p := range atB.pkts {
			if _, ok := atA.pkts[q]; ok && q > rehomed && bytes.Equal(p, rtpPacket(q)) {
				return true
			}
		}
		return false
	})
	if atC.count() != 0 || back.count() != 0 {
		t.Errorf("after the re-homing m1 heard itself: %d packets on node C, %d back at its sender", atC.count(), back.count())
	}
}

// TestPartitionedOwnerStops: node A owns a session with a link; then A is
// cut off from PostgreSQL (its catalog handle closed, so every query
// fails) while its NATS connection stays up. A stops acting as owner
// before its lease expires — the session's room and link are gone from
// A — and B takes the session over with the next epoch and runs A's link.
func TestPartitionedOwnerStops(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	a, b := c.nodes[0], c.nodes[1]
	s := createSession(t, a, "partitioned")
	m1, _ := joinMember(t, a, s.ID, "Ada")
	sender := udpConn(t)
	l := addLink(t, a, s.ID, map[string]any{"remote": sender.LocalAddr().String(), "kind": "audio", "rtcp_mux": true, "member": m1})
	if !a.sessions.Owns(s.ID) || a.sessions.Room(s.ID) == nil {
		t.Fatal("node A does not own and serve the session it created")
	}
	a.cat.Close() // the partition
	testutil.WaitFor(t, 30*time.Second, "A to stop acting as the session's owner", func() bool {
		return !a.sessions.Owns(s.ID) && a.sessions.Room(s.ID) == nil
	})
	var got sessionJSON
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if code := call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &got); code != 200 {
			return "GET through B: " + strconv.Itoa(code)
		}
		if got.Owner != "node-b" || got.OwnerEpoch != 2 || len(got.Links) != 1 || got.Links[0].ID != l.ID {
			return "owner " + got.Owner + " epoch " + strconv.FormatInt(got.OwnerEpoch, 10) + ", links " + strconv.Itoa(len(got.Links))
		}
		return ""
	})
	if a.sessions.LostLeases() != 1 {
		t.Errorf("node A counts %d lost leases", a.sessions.LostLeases())
	}
}
