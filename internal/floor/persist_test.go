package floor

import (
	"encoding/json"
	"reflect"
	"testing"
)

// What States shows, Restore puts back, for every style: a controller
// rebuilt from the saved States (through JSON, as the catalog keeps them)
// shows the same States and gates the same members.
func TestRestoreRoundTrip(t *testing.T) {
	for _, style := range []string{StyleFloorControl, StyleBrainstorming, StyleChalkboard, StyleDiscussion, StyleActivity} {
		t.Run(style, func(t *testing.T) {
			members := []string{"a", "b", "c"}
			c, rec := newCtl(t, members...)
			mustStyle(t, c, "audio", Settings{Style: style, Auto: true, SilenceMS: 250})
			for _, m := range members {
				if c.Holds(m, "audio") {
					continue // brainstorming: every speaker holds a replica
				}
				if _, err := c.Request(m, "audio"); err != nil {
					t.Fatalf("request %s: %v", m, err)
				}
			}
			before := c.States()
			b, err := json.Marshal(before)
			if err != nil {
				t.Fatal(err)
			}
			var saved []State
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}

			c2, rec2 := newCtl(t, members...)
			c2.Restore(saved)
			if after := c2.States(); !reflect.DeepEqual(after, before) {
				t.Fatalf("restored\n%+v\nwant\n%+v", after, before)
			}
			for _, m := range members {
				if c.Holds(m, "audio") != c2.Holds(m, "audio") {
					t.Errorf("%s holds %v before, %v after", m, c.Holds(m, "audio"), c2.Holds(m, "audio"))
				}
			}
			if rec.on["audio"] != rec2.on["audio"] || !reflect.DeepEqual(rec.gates["audio"], rec2.gates["audio"]) {
				t.Errorf("gate before %v %v, after %v %v", rec.on["audio"], rec.gates["audio"], rec2.on["audio"], rec2.gates["audio"])
			}
		})
	}
}
