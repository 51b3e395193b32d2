package sfu

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestQualityDelta(t *testing.T) {
	sent := map[string]Quality{}
	good := Quality{Score: "good", Loss: 0, RTTMs: 4, JitterMs: 2}
	now := map[string]Quality{"a": good, "b": good}
	if d := qualityDelta(sent, now, false); len(d) != 2 {
		t.Fatalf("first report: %v, want both members", d)
	}
	// Wander of a few milliseconds: nothing to tell.
	now = map[string]Quality{"a": {Score: "good", RTTMs: 9, JitterMs: 7}, "b": {Score: "good", Loss: 0.004, RTTMs: 4, JitterMs: 2}}
	if d := qualityDelta(sent, now, false); len(d) != 0 {
		t.Fatalf("wander reported: %v", d)
	}
	// A new score, a loss up by a point, a round trip doubled past 10 ms.
	steps := []struct {
		name string
		q    Quality
	}{
		{"score", Quality{Score: "fair", RTTMs: 4, JitterMs: 2}},
		{"loss", Quality{Score: "good", Loss: 0.01, RTTMs: 4, JitterMs: 2}},
		{"rtt", Quality{Score: "good", Loss: 0.01, RTTMs: 40, JitterMs: 2}},
		{"jitter", Quality{Score: "good", Loss: 0.01, RTTMs: 40, JitterMs: 25}},
	}
	for _, s := range steps {
		d := qualityDelta(sent, map[string]Quality{"a": s.q, "b": now["b"]}, false)
		if len(d) != 1 || d["a"] != s.q {
			t.Fatalf("%s: %v, want only a", s.name, d)
		}
	}
	// What was sent is the base: small steps that add up are told.
	base := sent["a"]
	for i := 1; i <= 5; i++ {
		q := base
		q.RTTMs += float64(3 * i)
		d := qualityDelta(sent, map[string]Quality{"a": q, "b": now["b"]}, false)
		if told := len(d) == 1; told != (i >= 5) { // 15 ms is a quarter of 55
			t.Fatalf("round trip up by %d ms: told %v", 3*i, told)
		}
	}
	// A member who left is forgotten, and told in full if it comes back.
	qualityDelta(sent, map[string]Quality{"b": now["b"]}, false)
	if _, ok := sent["a"]; ok {
		t.Fatal("a left but is still held")
	}
	if d := qualityDelta(sent, map[string]Quality{"a": good, "b": now["b"]}, false); len(d) != 1 {
		t.Fatalf("a back: %v", d)
	}
}

// In a large room only a new score is news.
func TestQualityDeltaLargeRoom(t *testing.T) {
	sent := map[string]Quality{}
	qualityDelta(sent, map[string]Quality{"a": {Score: "good", RTTMs: 5}}, true)
	if d := qualityDelta(sent, map[string]Quality{"a": {Score: "good", RTTMs: 90, JitterMs: 25, Loss: 0.015}}, true); len(d) != 0 {
		t.Errorf("numbers told in a large room: %v", d)
	}
	if d := qualityDelta(sent, map[string]Quality{"a": {Score: "fair", RTTMs: 160}}, true); len(d) != 1 {
		t.Errorf("a new score not told: %v", d)
	}
}

// qualityFrames takes the quality frames queued for p, decoded as the
// browser decodes them.
func qualityFrames(t *testing.T, p *Peer) []map[string]Quality {
	t.Helper()
	var got []map[string]Quality
	for {
		select {
		case f := <-p.out:
			if f.raw != nil {
				raw := f.raw
				f = Frame{}
				if err := json.Unmarshal(raw, &f); err != nil {
					t.Fatal(err)
				}
			}
			if f.Type != "quality" {
				t.Fatalf("a %q frame", f.Type)
			}
			got = append(got, f.Members)
		default:
			return got
		}
	}
}

func peersOf(n int) []*Peer {
	peers := make([]*Peer, n)
	for i := range peers {
		peers[i] = &Peer{member: fmt.Sprintf("m%03d", i), out: make(chan Frame, 64)}
	}
	return peers
}

// In a room of 120 browsers, where every member's score flaps each
// period, a browser gets the others' reports every third period only (a
// member's flapping in between is not news), and its own new score at
// once, alone; in a room of 10, every change every period.
func TestQualityInALargeRoomIsBounded(t *testing.T) {
	scores := [2]string{"good", "fair"}
	reports := func(peers []*Peer, period int) map[string]Quality {
		q := map[string]Quality{}
		for i, p := range peers {
			q[p.member] = Quality{Score: scores[(period+i)%2]}
		}
		return q
	}
	r := &room{}
	peers := peersOf(120)
	if e := qualityEvery(len(peers)); e != 3 {
		t.Fatalf("qualityEvery(120) = %d, want 3", e)
	}
	for _, p := range peers {
		p.qualitySent = true // joined before: no full report
	}
	var others, own int
	for period := 1; period <= 9; period++ {
		q := reports(peers, period)
		r.tellQuality(peers, q)
		for i, p := range peers {
			frames := qualityFrames(t, p)
			for _, m := range frames {
				if _, mine := m[p.member]; len(m) == 1 && mine {
					own++
					if m[p.member] != q[p.member] {
						t.Fatalf("period %d: %s told it is %v, it is %v", period, p.member, m[p.member], q[p.member])
					}
					continue
				}
				if period%3 != 0 {
					t.Fatalf("period %d: %s got the others' reports (%d)", period, p.member, len(m))
				}
				others += len(m)
			}
			if period%3 == 0 && len(frames) != 1 {
				t.Fatalf("period %d: %s got %d frames, want the room's report", period, p.member, len(frames))
			}
			if i == 0 && period%3 != 0 && len(frames) != 1 {
				t.Fatalf("period %d: %s's own new score: %d frames", period, p.member, len(frames))
			}
		}
	}
	// Three reports of at most 120 members each, to 120 browsers.
	if others > 3*120*120 || others == 0 {
		t.Errorf("the others' reports: %d entries in 9 periods, want 1..%d", others, 3*120*120)
	}
	if own == 0 {
		t.Error("no browser was told its own new score")
	}

	small := peersOf(10)
	r = &room{}
	for _, p := range small {
		p.qualitySent = true
	}
	for period := 1; period <= 3; period++ {
		r.tellQuality(small, reports(small, period))
		for _, p := range small {
			if f := qualityFrames(t, p); len(f) != 1 || len(f[0]) != 10 {
				t.Fatalf("small room, period %d: %s got %v", period, p.member, f)
			}
		}
	}

	// A browser that joins a large room gets what the others hold.
	late := peersOf(121)[120]
	late.member = "late"
	r = &room{}
	r.tellQuality(peers, reports(peers, 1))
	for range 2 {
		r.tellQuality(peers, reports(peers, 2))
	}
	for _, p := range peers {
		qualityFrames(t, p)
	}
	r.tellQuality(append(peers, late), reports(peers, 2))
	if f := qualityFrames(t, late); len(f) != 1 || len(f[0]) != 120 {
		t.Fatalf("a late joiner got %d frames (%v entries), want one of 120", len(f), len(f))
	}
}
