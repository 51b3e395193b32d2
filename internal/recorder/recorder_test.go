package recorder

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// TestRecordsTwoTracks: a room where a microphone and a camera publish,
// with a listener in it; every packet is in its stream's file, byte for
// byte and in order, the RTCP sender report is in the audio stream's file
// and sidecar, and the caller's events are on the time line.
func TestRecordsTwoTracks(t *testing.T) {
	room := broker.NewRoom("s_1")
	heard := 0
	room.Join(broker.Member{ID: "carol", Kind: media.Audio, Receives: true,
		Sink: broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { heard++; p.Release() })})
	mic, err := room.Join(broker.Member{ID: "alice/mic", Owner: "alice", Kind: media.Audio, Sends: true,
		Info: broker.TrackInfo{Codec: "audio/opus", ClockRate: 48000, Channels: 2, Fmtp: "minptime=10", Source: "microphone"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "rec")
	m := NewMetrics()
	rec, err := Start(room, dir, Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	// The camera joins after the recording started: OnChange taps it.
	cam, err := room.Join(broker.Member{ID: "bob/cam", Owner: "bob", Kind: media.Video, Sends: true,
		Info: broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000, Source: "camera"}})
	if err != nil {
		t.Fatal(err)
	}
	rec.Event(Event{Kind: MemberJoined, Member: "alice"})
	var audio, video [][]byte
	for i := 0; i < 200; i++ {
		a := rtp(111, uint16(i), 0xa1, 80+i%7)
		audio = append(audio, a)
		mic.Publish(packet(a))
		if i%2 == 0 {
			v := rtp(96, uint16(1000+i), 0xb0b, 1000+i)
			video = append(video, v)
			cam.Publish(packet(v))
		}
		if i == 100 {
			room.PublishRTCP("alice/mic", media.Audio, packet(senderReport(0xa1, 0xe8f0000080000000, 96000)))
			rec.Event(Event{Kind: FloorGranted, Member: "bob", Floor: "video"})
		}
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	if heard != 200 {
		t.Errorf("the listener heard %d packets, want 200", heard)
	}
	man, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.State != StateFinished || man.Session != "s_1" || len(man.Streams) != 2 {
		t.Fatalf("manifest %+v", man)
	}
	want := map[string][][]byte{"audio": audio, "video": video}
	for _, e := range man.Streams {
		got, err := readAll(t, filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		var rtpGot [][]byte
		rtcp := 0
		for _, p := range got {
			if p.RTCP {
				rtcp++
				continue
			}
			rtpGot = append(rtpGot, p.Data)
		}
		w := want[e.Kind]
		if len(rtpGot) != len(w) {
			t.Fatalf("%s: %d packets, want %d", e.File, len(rtpGot), len(w))
		}
		for i := range w {
			if !bytes.Equal(rtpGot[i], w[i]) {
				t.Fatalf("%s: packet %d differs", e.File, i)
			}
		}
		side := readSidecar(t, dir, e.Sidecar)
		if side.State != StateFinished || side.Packets != uint64(len(w)) {
			t.Errorf("%s: sidecar %+v", e.File, side)
		}
		switch e.Kind {
		case "audio":
			if side.SSRC != 0xa1 || side.Member != "alice" || side.Endpoint != "alice/mic" || side.Track != mic.ID() ||
				side.ClockRate != 48000 || len(side.PayloadTypes) != 1 ||
				side.PayloadTypes[0] != (PayloadType{PT: 111, Codec: "audio/opus", ClockRate: 48000, Channels: 2, Fmtp: "minptime=10"}) {
				t.Errorf("audio sidecar %+v", side)
			}
			if rtcp != 1 || side.RTCPPackets != 1 || len(side.SenderReports) != 1 {
				t.Fatalf("audio: %d RTCP records, sidecar %+v", rtcp, side)
			}
			sr := side.SenderReports[0]
			if sr.RTP != 96000 || sr.NTP != 0xe8f0000080000000 || sr.NTPTime.Unix() != 0xe8f00000-2208988800 ||
				sr.NTPTime.Nanosecond() != 5e8 || sr.Packets != 7 {
				t.Errorf("sender report %+v", sr)
			}
		case "video":
			if side.SSRC != 0xb0b || side.Member != "bob" || side.ClockRate != 90000 || side.Source != "camera" {
				t.Errorf("video sidecar %+v", side)
			}
		}
		if side.FirstPacket.Before(man.Started) || side.FirstPacket.After(man.Started.Add(10*time.Second)) {
			t.Errorf("first packet at %v, recording started %v", side.FirstPacket, man.Started)
		}
	}
	kinds := map[EventKind]int{}
	for _, e := range man.Events {
		kinds[e.Kind]++
	}
	if kinds[MemberJoined] != 1 || kinds[FloorGranted] != 1 || kinds[StreamStarted] != 2 ||
		kinds[RecordingStarted] != 1 || kinds[RecordingStopped] != 1 {
		t.Errorf("time line %v", kinds)
	}
	if got := testutil.ToFloat64(m.packets); got != 301 {
		t.Errorf("convene_recorder_packets_total %v, want 301", got)
	}
	if room.Members() != 3 {
		t.Errorf("%d members after Stop: the recorder did not leave", room.Members())
	}
	if n := cam.Subscribers(); n != 0 {
		t.Errorf("the camera has %d subscribers after Stop", n)
	}
}

// TestSSRCChange: a sender that changes SSRC on its track makes a second
// stream file; each holds its own packets in order.
func TestSSRCChange(t *testing.T) {
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "phone", Kind: media.Audio, Sends: true})
	dir := t.TempDir()
	rec, err := Start(room, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		ssrc := uint32(1)
		if i >= 10 {
			ssrc = 2
		}
		tr.Publish(packet(rtp(0, uint16(i), ssrc, 160)))
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	man, _ := ReadManifest(dir)
	if len(man.Streams) != 2 || man.Streams[0].SSRC != 1 || man.Streams[1].SSRC != 2 {
		t.Fatalf("streams %+v", man.Streams)
	}
	for k, e := range man.Streams {
		got, err := readAll(t, filepath.Join(dir, e.File))
		if err != nil || len(got) != 10 {
			t.Fatalf("%s: %d packets, %v", e.File, len(got), err)
		}
		for i, p := range got {
			if !bytes.Equal(p.Data, rtp(0, uint16(10*k+i), e.SSRC, 160)) {
				t.Fatalf("%s: packet %d differs", e.File, i)
			}
		}
		side := readSidecar(t, dir, e.Sidecar)
		if side.ClockRate != 8000 || side.PayloadTypes[0].Codec != "audio/PCMU" {
			t.Errorf("static payload type 0: %+v", side)
		}
	}
}

// TestOverflowDrops: a queue the writer cannot keep up with drops and
// counts; Publish goes on, and every packet is either written or counted.
func TestOverflowDrops(t *testing.T) {
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "p", Kind: media.Audio, Sends: true})
	m := NewMetrics()
	slow := make(chan uint64, 100)
	rec, err := Start(room, t.TempDir(), Options{Queue: 1, Metrics: m,
		OnSlowDisk: func(n uint64) {
			select {
			case slow <- n:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for rec.Stats().Dropped[dropQueueFull] == 0 && sent < 5_000_000 {
		tr.Publish(packet(rtp(0, uint16(sent), 9, 160)))
		sent++
	}
	dropped := rec.Stats().Dropped[dropQueueFull]
	if dropped == 0 {
		t.Fatalf("%d packets into a queue of 1 and none dropped", sent)
	}
	select {
	case n := <-slow:
		if n == 0 {
			t.Error("OnSlowDisk with no drops")
		}
	case <-time.After(5 * time.Second):
		t.Error("no OnSlowDisk within 5 s of a drop")
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	st := rec.Stats()
	if st.Packets+st.Dropped[dropQueueFull] != uint64(sent) {
		t.Errorf("%d written + %d dropped != %d sent", st.Packets, st.Dropped[dropQueueFull], sent)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull)); got != float64(st.Dropped[dropQueueFull]) {
		t.Errorf("metric %v, stats %d", got, st.Dropped[dropQueueFull])
	}
	if testutil.ToFloat64(m.slowDisk) == 0 {
		t.Error("convene_recorder_slow_disk_total is 0")
	}
	man, _ := ReadManifest(rec.Dir())
	found := false
	for _, e := range man.Events {
		found = found || e.Kind == SlowDisk
	}
	if !found || man.Dropped[dropQueueFull] != st.Dropped[dropQueueFull] {
		t.Errorf("manifest: slow_disk event %v, dropped %v", found, man.Dropped)
	}
}

// TestAsksVideoForAKeyframe: a recording that starts mid-stream asks each
// video track it taps for a keyframe (a browser sends one only when asked,
// and the recording cannot be decoded before it), audio tracks not.
func TestAsksVideoForAKeyframe(t *testing.T) {
	room := broker.NewRoom("s")
	var asked atomic.Int32
	room.Join(broker.Member{ID: "cam", Kind: media.Video, Sends: true, Keyframe: func() { asked.Add(1) }})
	room.Join(broker.Member{ID: "mic", Kind: media.Audio, Sends: true, Keyframe: func() { t.Error("an audio track was asked for a keyframe") }})
	rec, err := Start(room, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	if n := asked.Load(); n != 1 {
		t.Fatalf("the video track was asked for %d keyframes, want 1", n)
	}
	room.Join(broker.Member{ID: "cam2", Kind: media.Video, Sends: true, Keyframe: func() { asked.Add(1) }})
	for deadline := time.Now().Add(5 * time.Second); asked.Load() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the video track that came later was asked for %d keyframes, want 1", asked.Load()-1)
		}
	}
}

// TestAsksAgainUntilAKeyframe: a video track whose packets start with no
// keyframe is asked again every half second (the first request may have
// been throttled), and no more once a keyframe came.
func TestAsksAgainUntilAKeyframe(t *testing.T) {
	room := broker.NewRoom("s")
	var asked atomic.Int32
	cam, _ := room.Join(broker.Member{ID: "cam", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000},
		Keyframe: func() { asked.Add(1) }})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rec, err := Start(room, t.TempDir(), Options{Now: clock, SyncEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	send := func(seq uint16, key bool) {
		b := make([]byte, 12+4)
		b[0], b[1] = 0x80, 96
		binary.BigEndian.PutUint16(b[2:], seq)
		binary.BigEndian.PutUint32(b[8:], 0xcafe)
		b[12], b[13] = 0x10, 0x01 // VP8 descriptor S=1; payload header P=1: an interframe
		if key {
			b[13] = 0x00
		}
		p := media.NewPacket()
		p.SetLen(copy(p.Buffer(), b))
		cam.Publish(p)
	}
	// 2 s of interframes, 10 a second: asked at the tap, then every 500 ms.
	for i := range 20 {
		mu.Lock()
		now = now.Add(100 * time.Millisecond)
		mu.Unlock()
		send(uint16(i), false)
	}
	waitPackets(t, rec, 20)
	if n := asked.Load(); n < 4 || n > 6 {
		t.Errorf("asked %d times in 2 s without a keyframe, want the tap's and one every 500 ms", n)
	}
	send(20, true)
	before := asked.Load()
	for i := range 20 {
		mu.Lock()
		now = now.Add(100 * time.Millisecond)
		mu.Unlock()
		send(uint16(21+i), false)
	}
	waitPackets(t, rec, 41)
	if n := asked.Load(); n != before {
		t.Errorf("asked %d more times after a keyframe, want none", n-before)
	}
}

func waitPackets(t *testing.T, rec *Recording, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); rec.Stats().Packets != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the writer took %d packets, want %d", rec.Stats().Packets, n)
		}
	}
}

// TestSyncsBesideTheWriter: with syncs every few milliseconds, the syncer
// makes the files durable (syncfs rounds) while packets go on being
// written (the race detector watches the two goroutines), and the
// recording ends whole.
func TestSyncsBesideTheWriter(t *testing.T) {
	room := broker.NewRoom("s_sync")
	mic, err := room.Join(broker.Member{ID: "alice/mic", Owner: "alice", Kind: media.Audio, Sends: true,
		Info: broker.TrackInfo{Codec: "audio/opus", ClockRate: 48000, Channels: 2}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "rec")
	rec, err := Start(room, dir, Options{SyncEvery: 5 * time.Millisecond, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; rec.fsyncs.Load() < 4 && time.Now().Before(deadline); i++ {
		b := rtp(111, uint16(i), 0xa1, 100)
		sent = append(sent, b)
		mic.Publish(packet(b))
		time.Sleep(time.Millisecond)
	}
	if n := rec.fsyncs.Load(); n < 4 {
		t.Fatalf("the syncer synced %d files in 10 s", n)
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	man, err := ReadManifest(dir)
	if err != nil || man.State != StateFinished || len(man.Streams) != 1 {
		t.Fatalf("manifest %+v, %v", man, err)
	}
	got, err := readAll(t, filepath.Join(dir, man.Streams[0].File))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sent) {
		t.Fatalf("%d packets on disk, %d sent", len(got), len(sent))
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, sent[i]) {
			t.Fatalf("packet %d differs", i)
		}
	}
}
