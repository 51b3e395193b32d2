package composite

import (
	"slices"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// camera joins a video sender to room: a simulcast layer (1–3) of owner's
// camera, or with layer 0 a camera without simulcast.
func camera(t *testing.T, room *broker.Room, id, owner string, layer int, primary bool) *broker.Track {
	t.Helper()
	tr, err := room.Join(broker.Member{ID: id, Kind: media.Video, Sends: true, Owner: owner,
		Info: broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000, Source: "camera", Stream: owner, Layer: layer, Primary: primary}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// send publishes one packet on each track.
func send(tracks ...*broker.Track) {
	for _, tr := range tracks {
		pk := media.NewPacket()
		pk.SetLen(20)
		tr.Publish(pk)
	}
}

// chooser is a composite of room with no child, for its choose.
func chooser(room *broker.Room, req Request, members ...Member) *Composite {
	s := NewService(Options{Rooms: func(string) *broker.Room { return room },
		Members: func(string) []Member { return members }})
	cells, _ := Cells(req.Layout, 640, 360)
	return &Composite{s: s, session: "s", req: req, room: room, cells: cells, heard: map[*broker.Track]heard{}}
}

func shown(cs []choice) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		if c.track != nil {
			out[i] = c.track.Publisher() + "/" + c.name
		}
	}
	return out
}

// TestChooseLayers: of a simulcast camera the highest layer heard is
// shown, whether the primary one is sent or not (Chromium sends no top
// layer from a small camera), and a track asked for by any of its
// layers' IDs is shown by that layer; a camera without simulcast as it
// is, and a silent one not at all.
func TestChooseLayers(t *testing.T) {
	room := broker.New().Open("s")
	al, alM, alH := camera(t, room, "al-l", "al", 1, false), camera(t, room, "al-m", "al", 2, false), camera(t, room, "al-h", "al", 3, true)
	bea := camera(t, room, "bea", "bea", 0, true)
	camera(t, room, "cy", "cy", 0, true) // never sends
	members := []Member{{"al", "Al"}, {"bea", "Bea"}, {"cy", "Cy"}}

	c := chooser(room, Request{Layout: Grid2}, members...)
	now := time.Now()
	send(al, alM, bea) // no top layer
	if got, want := shown(c.choose(now)), []string{"al-m/Al", "bea/Bea", "", ""}; !slices.Equal(got, want) {
		t.Errorf("without the top layer: %q, want %q", got, want)
	}
	now = now.Add(tick)
	send(al, alM, alH, bea)
	if got, want := shown(c.choose(now)), []string{"al-h/Al", "bea/Bea", "", ""}; !slices.Equal(got, want) {
		t.Errorf("with the top layer: %q, want %q", got, want)
	}
	// The top layer falls silent (the sender's bandwidth dropped).
	for range 5 {
		now = now.Add(tick)
		send(al, alM, bea)
		c.choose(now)
	}
	if got, want := shown(c.choose(now)), []string{"al-m/Al", "bea/Bea", "", ""}; !slices.Equal(got, want) {
		t.Errorf("the top layer silent for %v: %q, want %q", 5*tick, got, want)
	}

	// Asked for by the primary layer's ID (silent) in the second cell.
	asked := chooser(room, Request{Layout: Grid2, Tracks: []string{"bea", "al-h", "cy"}}, members...)
	for range 5 {
		now = now.Add(tick)
		send(al, alM, bea)
		asked.choose(now)
	}
	if got, want := shown(asked.choose(now)), []string{"bea/Bea", "al-m/Al", "", ""}; !slices.Equal(got, want) {
		t.Errorf("asked for: %q, want %q", got, want)
	}
}
