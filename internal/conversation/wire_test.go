package conversation

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

// TestWire checks the wire vectors shared with the TypeScript client.
func TestWire(t *testing.T) {
	b, err := os.ReadFile("testdata/wire.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Messages []struct {
			Name         string
			Conversation uint64
			Flow         uint32
			Sender       MemberID
			Seq          uint64
			SentMS       int64 `json:"sent_ms"`
			Context      []struct {
				Member MemberID
				Seq    uint64
			}
			Payload, Hex string
		}
		Invalid []struct{ Name, Hex string }
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Messages {
		m := Message{Conversation: w.Conversation, Flow: w.Flow, Sender: w.Sender, Seq: w.Seq,
			Sent: time.UnixMilli(w.SentMS), Payload: []byte(w.Payload)}
		for _, d := range w.Context {
			m.Context = append(m.Context, Dep{d.Member, d.Seq})
		}
		if got := hex.EncodeToString(m.Marshal()); got != w.Hex {
			t.Errorf("%s: %s, want %s", w.Name, got, w.Hex)
		}
		raw, _ := hex.DecodeString(w.Hex)
		var got Message
		if err := Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		if len(got.Payload) == 0 {
			got.Payload = m.Payload
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: decoded %+v, want %+v", w.Name, got, m)
		}
		if m.ContextSize() != len(raw)-len(headerOnly(t, raw))-len(m.Payload) {
			t.Errorf("%s: ContextSize %d", w.Name, m.ContextSize())
		}
	}
	for _, w := range v.Invalid {
		raw, _ := hex.DecodeString(w.Hex)
		var m Message
		if err := Unmarshal(raw, &m); err == nil {
			t.Errorf("%s: %s decoded: %+v", w.Name, w.Hex, m)
		}
	}
}

// headerOnly returns the bytes before the context count.
func headerOnly(t *testing.T, raw []byte) []byte {
	r := reader{b: raw[1:]}
	for range 5 {
		r.uint(MaxInt)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return raw[:len(raw)-len(r.b)]
}
