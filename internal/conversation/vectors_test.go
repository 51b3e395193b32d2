package conversation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// The shared test vectors: testdata/vectors/*.json, run here and by
// web/test/conversation.test.ts; both must give the same deliveries.
type vector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Members     []string
	Receiver    string
	Flows       []struct {
		ID          uint32 `json:"id"`
		Name        string
		DelayMS     int64 `json:"delay_ms"`
		LossDelayMS int64 `json:"loss_delay_ms"`
	}
	SkewMS        int64 `json:"skew_ms"`
	DeltaMS       int64 `json:"delta_ms"`
	Buffer        int
	ExpectDeltaMS int64 `json:"expect_delta_ms"`
	Messages      []struct {
		ID      string
		From    string
		Seq     uint64
		Flow    uint32
		SentMS  int64 `json:"sent_ms"`
		Context map[string]uint64
		Payload string
	}
	Events []struct {
		AtMS   int64 `json:"at_ms"`
		Arrive string
		Tick   bool
	}
	Expect           []vectorDelivery
	ExpectDuplicates uint64 `json:"expect_duplicates"`
}

type vectorDelivery struct {
	AtMS    int64       `json:"at_ms"`
	Msg     string      `json:"msg"`
	Status  string      `json:"status"`
	Missing []vectorGap `json:"missing,omitempty"`
}

type vectorGap struct {
	Member string `json:"member"`
	First  uint64 `json:"first"`
	Last   uint64 `json:"last"`
}

func TestVectors(t *testing.T) {
	files, _ := filepath.Glob("testdata/vectors/*.json")
	if len(files) < 8 {
		t.Fatalf("%d vectors, want at least 8", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v vector
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			runVector(t, &v)
		})
	}
}

func runVector(t *testing.T, v *vector) {
	spec := Spec{ID: 7, Members: v.Members, Skew: ms(v.SkewMS), Delta: ms(v.DeltaMS), Buffer: v.Buffer}
	for _, f := range v.Flows {
		spec.Flows = append(spec.Flows, Flow{ID: f.ID, Name: f.Name, Delay: ms(f.DelayMS), LossDelay: ms(f.LossDelayMS)})
	}
	c, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if c.Delta() != ms(v.ExpectDeltaMS) {
		t.Fatalf("Δ = %v, want %d ms", c.Delta(), v.ExpectDeltaMS)
	}
	member := func(name string) MemberID {
		id, ok := c.Member(name)
		if !ok {
			t.Fatalf("unknown member %q", name)
		}
		return id
	}
	self := member(v.Receiver)
	r, err := c.Receiver(self)
	if err != nil {
		t.Fatal(err)
	}
	wire := map[string][]byte{}
	names := map[Dep]string{}
	for _, m := range v.Messages {
		msg := Message{Conversation: 7, Flow: m.Flow, Sender: member(m.From), Seq: m.Seq,
			Sent: time.UnixMilli(m.SentMS), Payload: []byte(m.Payload)}
		for _, name := range v.Members {
			if s, ok := m.Context[name]; ok {
				msg.Context = append(msg.Context, Dep{member(name), s})
			}
		}
		wire[m.ID] = msg.Marshal()
		names[Dep{msg.Sender, msg.Seq}] = m.ID
	}
	got := []vectorDelivery{}
	record := func(at int64, ds []Delivery) {
		for _, d := range ds {
			vd := vectorDelivery{AtMS: at, Msg: names[Dep{d.Message.Sender, d.Message.Seq}], Status: d.Status.String()}
			for _, g := range d.Missing {
				vd.Missing = append(vd.Missing, vectorGap{v.Members[g.Member], g.First, g.Last})
			}
			got = append(got, vd)
		}
	}
	for _, e := range v.Events {
		now := time.UnixMilli(e.AtMS)
		if e.Tick {
			record(e.AtMS, r.Tick(now))
			continue
		}
		var m Message
		if err := Unmarshal(wire[e.Arrive], &m); err != nil {
			t.Fatalf("%s: %v", e.Arrive, err)
		}
		ds, err := r.Receive(m, now)
		if err != nil {
			t.Fatalf("%s: %v", e.Arrive, err)
		}
		record(e.AtMS, ds)
	}
	if !reflect.DeepEqual(got, v.Expect) {
		gb, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("deliveries:\n%s", gb)
	}
	if r.Duplicates() != v.ExpectDuplicates {
		t.Errorf("duplicates %d, want %d", r.Duplicates(), v.ExpectDuplicates)
	}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
