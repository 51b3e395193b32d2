package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/convene/convene/internal/broker"
)

// A link that names its codec gives its track that codec (receivers,
// recordings and exports learn what a dynamic payload type carries), keeps
// it in the catalog across a restart, and a wrong name is refused; a phone
// that hears the mix is known to send in the mix's codec.
func TestLinkCodec(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "c.db")
	svc, _ := newService(t, db)
	s, err := svc.Create(ctx, "codecs")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []NewRTPLink{
		{Remote: "127.0.0.1:47100", Kind: "video", Codec: "VP8"},           // no clock rate
		{Remote: "127.0.0.1:47100", Kind: "video", Codec: "AV1X/90000"},    // unknown name, no kind
		{Remote: "127.0.0.1:47100", Kind: "video", Codec: "opus/48000/2"},  // audio on a video link
		{Remote: "127.0.0.1:47100", Kind: "audio", Codec: "PCMU/1"},        // clock rate
		{Remote: "127.0.0.1:47100", Kind: "audio", Codec: "opus/48000/99"}, // channels
	} {
		if _, err := svc.AddRTPLink(ctx, s.ID, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("codec %q on %s: %v, want invalid", bad.Codec, bad.Kind, err)
		}
	}
	if _, err := svc.AddMulticastLink(ctx, s.ID, NewMulticastLink{Group: "239.1.2.3:5004", Kind: "audio", Codec: "H264/90000"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("video codec on an audio group: %v", err)
	}
	v, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47102", Kind: "video", Codec: "h264/90000"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Codec != "h264/90000" {
		t.Errorf("link says codec %q", v.Codec)
	}
	plain, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: "127.0.0.1:47106", Kind: "audio"})
	if err != nil {
		t.Fatal(err)
	}
	infoOf := func(svc *Service, id string) broker.TrackInfo {
		t.Helper()
		for _, tr := range svc.roomOf(s.ID).Tracks() {
			if tr.Publisher() == id {
				return tr.Info()
			}
		}
		t.Fatalf("no track %s", id)
		return broker.TrackInfo{}
	}
	check := func(svc *Service) {
		t.Helper()
		if in := infoOf(svc, v.ID); in.Codec != "video/H264" || in.ClockRate != 90000 {
			t.Errorf("video link's track: %+v", in)
		}
		if in := infoOf(svc, plain.ID); in.Codec != "" {
			t.Errorf("a link that names nothing has codec %q", in.Codec)
		}
	}
	check(svc)
	svc.Drain()
	again, _ := newService(t, db)
	if err := again.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Drain)
	check(again)

	// What a phone hearing the mix sends (the test service has no mixer,
	// so the mapping is checked on its own; node tests run phones).
	for mix, want := range map[string]broker.TrackInfo{
		"opus/48000/2:111": {Codec: "audio/opus", ClockRate: 48000, Channels: 2, Source: "rtp"},
		"PCMA":             {Codec: "audio/PCMA", ClockRate: 8000, Channels: 1, Source: "rtp"},
		"G722":             {Codec: "audio/G722", ClockRate: 8000, Channels: 1, Source: "rtp"},
	} {
		spec, _, err := parseMix(mix)
		if err != nil {
			t.Fatal(err)
		}
		if got := mixInfo(spec); got != want {
			t.Errorf("mix %s: %+v, want %+v", mix, got, want)
		}
	}
}
