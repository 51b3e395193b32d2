//go:build linux

package node

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/conversation"
	"github.com/convene/convene/internal/netnstest"
)

// The seed's workload between members (internal/conversation's
// TestWorkloadSeed, here through a node): ten members, chat and board
// messages at random, 1 % loss, 20–500 ms between members. A member's
// message crosses the loopback twice (to the node, then to the other
// member), so each crossing is delayed 10–250 ms, uniformly, and loses
// 0.5 % of packets.
var hopNetem = []string{"delay", "130ms", "120ms", "loss", "0.5%"}

// TestChatUnderDelayAndLoss runs the seed's workload through a node whose
// members' packets are delayed and lost: with netem on the loopback of a
// network namespace of its own, or, where the kernel has no netem (some
// have no sch_netem, built in or as a module), through an injected-delay
// link in the test (chatDelayLink) that delays the sockets' bytes the same
// way. The sockets are TCP, so a lost packet is sent again, later: loss
// becomes delay, and a message that comes more than Δ after it was sent
// must be reported late, never delivered as if on time. Real loss is a
// lossy sender's: each member drops 1 % of its own messages before the
// node (their sequence numbers used, never sent). Asserted: per-sender
// and Δ-causal order; every message delivered once; a message delivered
// on time only before its deadline; late exactly when it arrived more
// than Δ after it was sent (measured by the test, never assumed); and
// exceptions naming exactly the dropped messages, every one of them that
// its sender followed with more.
func TestChatUnderDelayAndLoss(t *testing.T) {
	netem := netnstest.NetemAvailable()
	if netem == nil && !netnstest.Enter(t) {
		return
	}
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "delay and loss")
	r := newChatRun(t, s.ID)
	r.strict = true // one node, one TCP stream per member: nothing overtakes
	dial := n.URL
	if netem != nil {
		t.Logf("no netem here (%v): an injected-delay link in the test instead", netem)
		link := startDelayLink(t, n.URL()[len("http://"):], 10*time.Millisecond, 250*time.Millisecond, 0.005)
		dial = func() string { return "http://" + link }
	}
	var ms []*chatMember
	for i := range 10 {
		name := string(rune('A' + i))
		_, tok := joinMember(t, n, s.ID, name)
		ms = append(ms, r.join(name, tok, dial))
	}
	r.growAll()
	if netem == nil {
		netnstest.Netem(t, hopNetem...) // after the set-up, which it would only slow
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.workload(m, 1, 40, 500*time.Millisecond, 0.01, nil)
		}()
	}
	wg.Wait()
	r.settle(n)
	count, named, _, _ := r.report()
	t.Logf("the workload ran %v", time.Since(start).Round(time.Millisecond))
	if named == 0 || count[conversation.Expired] == 0 {
		t.Errorf("no lost message was followed by more from its sender: the workload tests no exception (change its seed)")
	}
}

// startDelayLink is a TCP proxy to target standing in for a lossy link
// where the kernel has no netem: each direction's bytes are held for a
// uniform min–max delay after they were read, in order (TCP delivers a
// stream in order, so a chunk never overtakes the one before it), and
// with probability loss a chunk waits as long again plus 200 ms more, as
// a lost segment does for its retransmission (Linux's smallest RTO).
func startDelayLink(t *testing.T, target string, min, max time.Duration, loss float64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var seed uint64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); up.Close() })
			seed++
			go delayCopy(up, c, rand.New(rand.NewPCG(seed, 1)), min, max, loss)
			go delayCopy(c, up, rand.New(rand.NewPCG(seed, 2)), min, max, loss)
		}
	}()
	return ln.Addr().String()
}

func delayCopy(dst, src net.Conn, rng *rand.Rand, min, max time.Duration, loss float64) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 4096)
	go func() {
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				io.Copy(io.Discard, src)
				return
			}
		}
	}()
	defer close(q)
	var last time.Time
	for {
		b := make([]byte, 32<<10)
		k, err := src.Read(b)
		if k > 0 {
			d := min + time.Duration(rng.Int64N(int64(max-min)+1))
			if rng.Float64() < loss {
				d = 2*d + 200*time.Millisecond
			}
			at := time.Now().Add(d)
			if at.Before(last) {
				at = last
			}
			last = at
			q <- chunk{b[:k], at}
		}
		if err != nil {
			return
		}
	}
}
