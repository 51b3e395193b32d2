package conversation

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

func fuzzSeeds(f *testing.F) {
	for _, m := range []Message{
		{Conversation: 7, Flow: 1, Sender: 0, Seq: 1, Sent: time.UnixMilli(0), Payload: []byte("hi")},
		{Conversation: 7, Flow: 2, Sender: 1, Seq: 2, Sent: time.UnixMilli(1_700_000_000_000),
			Context: []Dep{{0, 3}, {2, 1}, {300, 1 << 20}}, Payload: []byte("stroke")},
		{Conversation: MaxInt, Flow: 1<<32 - 1, Sender: 1<<32 - 1, Seq: MaxInt, Sent: time.UnixMilli(MaxInt)},
	} {
		f.Add(m.Marshal())
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0x80})
	f.Add([]byte{2, 7, 1, 0, 1, 0, 0})
}

// FuzzUnmarshal: any input decodes or fails without panicking, and what
// decodes encodes back to the same message.
func FuzzUnmarshal(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := Unmarshal(b, &m); err != nil {
			return
		}
		var again Message
		if err := Unmarshal(m.Marshal(), &again); err != nil {
			t.Fatalf("re-encoded %x: %v", m.Marshal(), err)
		}
		if !reflect.DeepEqual(m.Context, again.Context) && len(m.Context)+len(again.Context) > 0 ||
			!bytes.Equal(m.Payload, again.Payload) || m.Seq != again.Seq || m.Sender != again.Sender ||
			m.Flow != again.Flow || m.Conversation != again.Conversation || !m.Sent.Equal(again.Sent) {
			t.Fatalf("%+v became %+v", m, again)
		}
	})
}

// FuzzReceive feeds a receiver length-prefixed messages, one every 50 ms:
// it never panics, never loops, holds at most its cap, and delivers each
// (sender, seq) at most once in order.
func FuzzReceive(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := New(Spec{ID: 7, Members: []string{"A", "B", "C", "D"}, Buffer: 4,
			Flows: []Flow{{ID: 1, Delay: 100 * time.Millisecond, LossDelay: 300 * time.Millisecond},
				{ID: 2, Delay: 50 * time.Millisecond, LossDelay: 400 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := c.Receiver(3)
		now := time.UnixMilli(0)
		seen := map[Dep]bool{}
		check := func(ds []Delivery) {
			for _, d := range ds {
				id := Dep{d.Message.Sender, d.Message.Seq}
				if seen[id] {
					t.Fatalf("%v delivered twice", id)
				}
				seen[id] = true
			}
			if r.Held() > 4 {
				t.Fatalf("%d held", r.Held())
			}
		}
		for len(b) > 0 {
			n := min(int(b[0]), len(b)-1)
			var m Message
			if Unmarshal(b[1:1+n], &m) == nil {
				ds, _ := r.Receive(m, now)
				check(ds)
			}
			b = b[1+n:]
			now = now.Add(50 * time.Millisecond)
		}
		check(r.Tick(now.Add(time.Hour)))
	})
}
