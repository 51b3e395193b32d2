package node

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/testutil"
)

// TestRecordingPlacedByRoom: node A has no disk capacity left for a
// recording (recording.capacity_mbps below one audio track's 128 kb/s),
// node B has. A chair asks A, the session's owner, to record a session
// whose member sends to A: B records it, pulling the member's track over
// the bridge (B had no part in the session before), the answer says so,
// stopping it through A stops it on B, and B's file holds what the member
// sent. Without placement A refuses with 503.
func TestRecordingPlacedByRoom(t *testing.T) {
	c := startCluster(t)
	a := c.start(t, "node-a", func(cfg *config.Config) { cfg.Recording.CapacityMbps = 0.01 })
	b := c.start(t, "node-b", func(cfg *config.Config) { cfg.Recording.CapacityMbps = 1000 })
	s := createSession(t, a, "placed recording")
	m1, _ := joinMember(t, a, s.ID, "Ada")
	sender := udpConn(t)
	addLink(t, a, s.ID, map[string]any{"remote": sender.LocalAddr().String(), "kind": "audio", "direction": "sendonly",
		"rtcp_mux": true, "member": m1})
	if b.sessions.Room(s.ID) != nil {
		t.Fatal("node B has the session's room before any recording")
	}
	testutil.WaitUntil(t, 30*time.Second, func() string {
		if got := a.registry.WithRecordingRoom("node-a", 128e3); len(got) != 1 || got[0].ID != "node-b" {
			return fmt.Sprintf("node A's registry names %v for a recording", got)
		}
		return ""
	})

	dst, err := net.ResolveUDPAddr("udp", a.RTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	stopSending := paceRTP(sender, dst, nil)
	defer stopSending()

	var rec failoverRecordingJSON
	if code := call(t, "POST", a.URL()+"/api/v1/sessions/"+s.ID+"/recordings", map[string]string{"title": "placed"}, &rec); code != 201 {
		t.Fatalf("start the recording through node A: %d", code)
	}
	if rec.Node != "node-b" || rec.State != "recording" {
		t.Fatalf("the recording runs on %q (%s), want node-b", rec.Node, rec.State)
	}
	testutil.WaitUntil(t, 30*time.Second, func() string {
		var got failoverRecordingJSON
		call(t, "GET", a.URL()+"/api/v1/recordings/"+rec.ID, nil, &got)
		var n int64
		for _, f := range got.Files {
			n += f.FileBytes / (8 + 172) // an rtpdump record: 8 bytes of header, the packet
		}
		if n < 100 {
			return fmt.Sprintf("node B recorded %d of the member's packets", n)
		}
		return ""
	})
	stopSending()
	var out failoverRecordingJSON
	if code := call(t, "POST", a.URL()+"/api/v1/recordings/"+rec.ID+"/stop", nil, &out); code != 200 || out.State != "finished" {
		t.Fatalf("stop through node A: %d, %s", code, out.State)
	}

	// Whoever publishes on B's subject: garbage and a start without an
	// owner are refused as invalid, a stop of no recording is not found;
	// B starts nothing.
	for req, want := range map[string]string{`{"start":`: "invalid", `{"start":{"Session":"` + s.ID + `"}}`: "invalid",
		`{"stop":"r_nosuchrecording"}`: "not_found"} {
		m, err := a.Bus().Conn().Request(recordSubject("node-b"), []byte(req), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var ans recordAnswer
		if err := json.Unmarshal(m.Data, &ans); err != nil || ans.Code != want || ans.Recording != nil {
			t.Errorf("%s: %s, want code %s", req, m.Data, want)
		}
	}
	if n := b.recordings.Running(); n != 0 {
		t.Errorf("node B writes %d recordings after the bad requests", n)
	}

	// A session no node has is not found (B would open its room).
	if code := call(t, "POST", b.URL()+"/api/v1/sessions/s_nosuchsession/recordings", map[string]string{"title": "x"}, nil); code != 404 {
		t.Errorf("a recording of a session that does not exist: %d, want 404", code)
	}

	// B's file holds the member's packets as sent (seqsIn checks each).
	if n := len(seqsIn(t, filepath.Join(b.cfg.RecordingDir(), rec.ID))); n < 100 {
		t.Fatalf("node B's files hold %d of the member's packets", n)
	}
}

// FuzzParseRecordAsk: whatever another node (or anyone on the NATS)
// sends, a request is refused or is exactly one of a start naming a
// session and an owner and a stop naming a recording.
func FuzzParseRecordAsk(f *testing.F) {
	for _, s := range []string{`{"start":{"Session":"s_1","Owner":"operator","Title":"t"}}`, `{"stop":"r_1"}`,
		`{"start":{"Session":"s_1","Owner":"o"},"stop":"r_1"}`, `{}`, `null`, `{"start":null}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ask, err := parseRecordAsk(b)
		if err != nil {
			return
		}
		if (ask.Start != nil) == (ask.Stop != "") {
			t.Fatalf("accepted %q: start %v, stop %q", b, ask.Start, ask.Stop)
		}
		if ask.Start != nil && (ask.Start.Session == "" || ask.Start.Owner == "") {
			t.Fatalf("accepted %q: a start without session or owner", b)
		}
	})
}
