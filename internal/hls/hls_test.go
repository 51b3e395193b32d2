package hls

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/testutil"
)

// stubFFmpeg is a child that takes any arguments and waits: these tests
// look at what the stream feeds and asks of ffmpeg, not at ffmpeg.
func stubFFmpeg(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ffmpeg")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func camera(t *testing.T, room *broker.Room, id, owner string) {
	t.Helper()
	if _, err := room.Join(broker.Member{ID: id, Kind: media.Video, Sends: true, Owner: owner}); err != nil {
		t.Fatal(err)
	}
}

// TestStreamFollowsSpeaker: a stream shows the first camera, then the
// active speaker's; when the last camera goes, its child is started
// again to encode the card (no SDP); a second stream beyond Max is
// refused; the session's room going away stops the stream and removes
// its directory. The session's events say hls.started, then hls.stopped.
func TestStreamFollowsSpeaker(t *testing.T) {
	b := broker.New()
	room := b.Open("s_1")
	camera(t, room, "link-a", "m_a")
	camera(t, room, "link-b", "m_b")
	dir := t.TempDir()
	hub := events.New(events.Options{})
	_, sub, _ := hub.Subscribe("s_1", -1)
	svc := NewService(Options{Dir: dir, FFmpeg: stubFFmpeg(t), Max: 1, Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{}), Events: hub})
	defer svc.Close()

	info, started, err := svc.Start("s_1", StartOptions{})
	if err != nil || !started {
		t.Fatalf("start: %v %v", started, err)
	}
	if ev := <-sub.C(); ev.Type != event.HLSStarted.String() || !strings.Contains(string(ev.Data), `"playlist":"/hls/s_1/index.m3u8"`) {
		t.Errorf("first event %+v, want hls.started with the playlist", ev)
	}
	if _, again, _ := svc.Start("s_1", StartOptions{}); again {
		t.Error("a second start of the same session started another stream")
	}
	if !strings.HasPrefix(info.Video, "link-a") {
		t.Errorf("shows %q first, want link-a's camera", info.Video)
	}
	b.Open("s_2")
	if _, _, err := svc.Start("s_2", StartOptions{}); !errors.Is(err, ErrCapacity) {
		t.Errorf("a second stream: %v, want ErrCapacity", err)
	}
	sdp := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "s_1", "stream.sdp"))
		return string(b)
	}
	if !strings.Contains(sdp(), "m=video") {
		t.Errorf("SDP without the camera:\n%s", sdp())
	}

	svc.SetSpeakers("s_1", []string{"m_nocam", "m_b"})
	testutil.WaitFor(t, 5*time.Second, "m_b's camera shown", func() bool {
		i, _ := svc.Get("s_1")
		return strings.HasPrefix(i.Video, "link-b")
	})

	pid := svc.PID("s_1")
	room.Leave("link-a")
	room.Leave("link-b")
	testutil.WaitFor(t, 5*time.Second, "a child of the card (no SDP)", func() bool {
		p := svc.PID("s_1")
		_, err := os.Stat(filepath.Join(dir, "s_1", "stream.sdp"))
		return p != 0 && p != pid && os.IsNotExist(err)
	})
	if i, _ := svc.Get("s_1"); i.Video != "" || i.Restarts != 1 {
		t.Errorf("after the cameras left: %+v", i)
	}

	b.Remove("s_1")
	// The session's end stops the stream from the stream's own goroutine:
	// it leaves the list first, then its child stops and its files go.
	testutil.WaitFor(t, 5*time.Second, "the stream to end with its session and its directory to go", func() bool {
		_, ok := svc.Get("s_1")
		_, err := os.Stat(filepath.Join(dir, "s_1"))
		return !ok && os.IsNotExist(err)
	})
	if ev := <-sub.C(); ev.Type != event.HLSStopped.String() {
		t.Errorf("next event %+v, want hls.stopped (a second start announces nothing)", ev)
	}
	if _, _, err := svc.Start("s_gone", StartOptions{}); !errors.Is(err, ErrNoSession) {
		t.Errorf("a session not active: %v, want ErrNoSession", err)
	}
}

// TestSpeakerHoldKeepsThePicture: a camera that came on stays shown while
// another member speaks, for SpeakerHold; with a short hold the picture
// follows the speaker.
func TestSpeakerHoldKeepsThePicture(t *testing.T) {
	for _, c := range []struct {
		hold   time.Duration
		follow bool
	}{{time.Hour, false}, {time.Millisecond, true}} {
		b := broker.New()
		room := b.Open("s_1")
		camera(t, room, "link-a", "m_a")
		camera(t, room, "link-b", "m_b")
		svc := NewService(Options{Dir: t.TempDir(), FFmpeg: stubFFmpeg(t), Max: 1, Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{}),
			Events: events.New(events.Options{}), SpeakerHold: c.hold})
		info, _, err := svc.Start("s_1", StartOptions{})
		if err != nil || !strings.HasPrefix(info.Video, "link-a") {
			t.Fatalf("start: %+v %v", info, err)
		}
		svc.SetSpeakers("s_1", []string{"m_b"})
		if c.follow {
			testutil.WaitFor(t, 5*time.Second, "m_b's camera shown", func() bool {
				i, _ := svc.Get("s_1")
				return strings.HasPrefix(i.Video, "link-b")
			})
		} else {
			time.Sleep(2 * time.Second) // four of the stream's half-second looks
			if i, _ := svc.Get("s_1"); !strings.HasPrefix(i.Video, "link-a") {
				t.Errorf("hold %v: shows %q, want link-a's camera still", c.hold, i.Video)
			}
		}
		svc.Close()
	}
}
