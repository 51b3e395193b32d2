package sfu

import "testing"

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
