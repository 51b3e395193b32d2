package bridge

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// TestMediaConnKeepsEachSubjectsOrder: messages of many subscriptions
// sharing the queues reach their own handler, each subject's in the order
// sent; after unsubscribing, a subject's handler gets nothing more.
func TestMediaConnKeepsEachSubjectsOrder(t *testing.T) {
	srv := natsServer(t)
	pub, sub := mediaConn(t, srv), mediaConn(t, srv)
	const subjects, each = 40, 200
	var mu sync.Mutex
	got := make([][]uint32, subjects)
	var unsubs []func()
	for i := range subjects {
		u, err := sub.Subscribe(fmt.Sprintf("convene.m.a.%d", i), func(subject string, data []byte) {
			if subject != fmt.Sprintf("convene.m.a.%d", i) {
				t.Errorf("subscription %d handed %s", i, subject)
			}
			mu.Lock()
			got[i] = append(got[i], binary.BigEndian.Uint32(data))
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		unsubs = append(unsubs, u)
	}
	// Subscriptions travel to the server before the first message.
	if err := sub.(*MediaConn).nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for n := range each {
		for i := range subjects {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(n))
			if err := pub.Publish(fmt.Sprintf("convene.m.a.%d", i), b[:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(i int) int { mu.Lock(); defer mu.Unlock(); return len(got[i]) }
	testutil.WaitFor(t, 10*time.Second, "every message delivered", func() bool {
		for i := range subjects {
			if count(i) < each {
				return false
			}
		}
		return true
	})
	mu.Lock()
	for i, g := range got {
		for n, v := range g {
			if v != uint32(n) {
				t.Fatalf("subject %d: message %d is %d (out of order)", i, n, v)
			}
		}
	}
	mu.Unlock()
	unsubs[0]()
	sub.(*MediaConn).nc.Flush()
	pub.Publish("convene.m.a.0", []byte{0, 0, 0, 9})
	pub.Publish("convene.m.a.1", []byte{0, 0, 0, 9})
	testutil.WaitFor(t, 10*time.Second, "subject 1's last message", func() bool { return count(1) == each+1 })
	if c := count(0); c != each {
		t.Fatalf("subject 0 got %d messages after its unsubscribe", c-each)
	}
}
