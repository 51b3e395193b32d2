package thumbnail

import (
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/testutil"
)

// TestGrabberPerCamera: a member's thumbnail keeps its grabber while any
// layer of the member's simulcast camera is there (the layer asked for
// by the member's ID may change), and a grabber replaced by another
// camera's under the same name is closed, not left running.
func TestGrabberPerCamera(t *testing.T) {
	stand := testutil.NeedBinary(t, "true") // no images needed: a child that exits
	room := broker.NewRoom("s")
	s := NewService(Options{Dir: t.TempDir(), FFmpeg: stand, Rooms: func(string) *broker.Room { return room }})
	t.Cleanup(s.Close)
	join := func(id string, layer int) {
		t.Helper()
		if _, err := room.Join(broker.Member{ID: id, Kind: media.Video, Sends: true, Owner: "ada",
			Info: broker.TrackInfo{Codec: "video/VP8", Stream: "ada-camera", Layer: layer}}); err != nil {
			t.Fatal(err)
		}
	}
	join("a-l", 1)
	join("a-m", 2)
	g1, err := s.grabber("s", "ada")
	if err != nil {
		t.Fatal(err)
	}
	room.Leave("a-l") // the member's first video track is the m layer now
	if g, err := s.grabber("s", "ada"); err != nil || g != g1 {
		t.Errorf("another grabber (%v) for another layer of the same camera", err)
	}

	room.Leave("a-m")
	join("a-cam", 0) // a camera without simulcast, under the same member
	g2, err := s.grabber("s", "ada")
	if err != nil || g2 == g1 {
		t.Fatalf("the new camera's grabber: %v, the old one again: %v", err, g2 == g1)
	}
	testutil.WaitFor(t, 5*time.Second, "the old grabber closed", func() bool {
		select {
		case <-g1.stop:
			return true
		default:
			return false
		}
	})
}
